// Package ddl holds rdmawatch's ClickHouse DDL and its shipped queries as
// SQL files, embedded into the binary. The files are the contract for SREs
// reading the tables; internal/chdb applies and runs them.
package ddl

import "embed"

// Migrations are the numbered schema migrations, migrations/NNNN_name.sql,
// applied in order and never edited once released (they are history).
//
//go:embed migrations/*.sql
var Migrations embed.FS

// MigrationsDir is the directory of Migrations inside the FS.
const MigrationsDir = "migrations"

// Queries are the named postmortem and capacity queries, queries/<name>.sql.
//
//go:embed queries/*.sql
var Queries embed.FS

// QueriesDir is the directory of Queries inside the FS.
const QueriesDir = "queries"

// Rollups are the statements that roll port_samples into the minute rollup,
// the minutes into the hour rollup, the hours into the day rollup and the
// port-days into the group-days, rollups/<minute|hour|day|day_group>.sql,
// each bound to a time range @from..@to.
//
//go:embed rollups/*.sql
var Rollups embed.FS
