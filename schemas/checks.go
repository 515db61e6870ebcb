package schemas

// Check is one next step for an engineer: a command that pastes into a shell
// on a jump host as it is (ssh to the node or switch, quoted), and a short
// note saying what to look for. An event's next_checks lists the commands;
// its checks field carries both.
type Check struct {
	Command string `json:"command" msgpack:"command"`
	Note    string `json:"note,omitempty" msgpack:"note,omitempty"`
}

// CheckCommands are the commands of checks, the next_checks of an event.
func CheckCommands(checks []Check) []string {
	out := make([]string, 0, len(checks))
	for _, c := range checks {
		if c.Command != "" {
			out = append(out, c.Command)
		}
	}
	return out
}
