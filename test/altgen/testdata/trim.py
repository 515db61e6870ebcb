#!/usr/bin/env python3
"""Cut a regression case out of an altgen trace: the lines in [FROM, TO)
(HH:MM:SS of the trace's day), only the counters the named types read, and
the labels of those types that overlap the window.

    trim.py SRC_DIR DST_DIR FROM TO TYPE[,TYPE]

SRC_DIR holds trace.jsonl (altgen -gz=false), topology.json, labels.jsonl;
DST_DIR gets trace.jsonl.gz, topology.json, labels.jsonl."""
import gzip, json, shutil, sys

KEEP = {
    "pfc_storm": {
        "counters": lambda k: k in ("port_rcv_data", "port_xmit_data", "port_rcv_packets", "port_xmit_packets"),
        "hw_counters": lambda k: k in ("rp_cnp_handled", "np_ecn_marked_roce_packets", "np_cnp_sent"),
        "ethtool": lambda k: "pause" in k or "storm" in k,
    },
    "cnp_ecn_imbalance": {
        "counters": lambda k: k in ("port_rcv_data", "port_xmit_data", "port_rcv_packets", "port_xmit_packets"),
        "hw_counters": lambda k: k.startswith("np_") or k.startswith("rp_"),
        "ethtool": lambda k: "pause" in k,
    },
    "receive_starvation": {
        "counters": lambda k: k in ("port_rcv_data", "port_xmit_data", "port_rcv_packets", "port_xmit_packets"),
        "hw_counters": lambda k: k in ("out_of_buffer", "rnr_nak_retry_err"),
        "ethtool": lambda k: "pause" in k or k in ("rx_out_of_buffer", "rx_discards_phy"),
    },
}

src, dst, frm, to, types = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5].split(",")
import os
os.makedirs(dst, exist_ok=True)
keep = {}
for t in types:
    for sec, f in KEEP[t].items():
        keep.setdefault(sec, []).append(f)
with open(src + "/trace.jsonl") as r, gzip.open(dst + "/trace.jsonl.gz", "wt", compresslevel=9) as w:
    for line in r:
        e = json.loads(line)
        if not (frm <= e["ts"][11:19] < to):
            continue
        for sec in ("counters", "hw_counters", "ethtool"):
            if sec in e:
                e[sec] = {k: v for k, v in e[sec].items() if any(f(k) for f in keep.get(sec, []))}
                if not e[sec]:
                    del e[sec]
        w.write(json.dumps(e, separators=(",", ":")) + "\n")
shutil.copy(src + "/topology.json", dst + "/topology.json")
with open(src + "/labels.jsonl") as r, open(dst + "/labels.jsonl", "w") as w:
    for line in r:
        l = json.loads(line)
        if l["type"] not in types:
            continue
        end = (l.get("end") or "9999-12-31T23:59:59")[11:19] if l.get("end") else "99:99:99"
        if l["start"][11:19] < to and end >= frm:
            w.write(line)
