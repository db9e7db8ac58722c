# prom-lib.sh - what the Prometheus tests of this directory share (sourced): a real Prometheus
# (Debian's package) on 127.0.0.1 scraping one target with deploy/monitoring/volagent.rules.yml
# loaded, each `for:` cut to 5s so that an alert fires within seconds, and the questions asked
# of its API.  The caller sets $T (its temporary dir) and $scale (TEST_TIME_SCALE), and stops
# $prom_pid on exit.
#   free_port                       prints a free TCP port on 127.0.0.1
#   wait_for SECONDS CMD...         polls CMD every 0.5 s until it succeeds or SECONDS (scaled)
#                                   have passed
#   prom_start TARGET               starts Prometheus on a free port ($prom_port, $prom_pid)
#                                   scraping TARGET (host:port) every second
#   alert_state NAME STATE          the alert NAME is in STATE in /api/v1/alerts ("none":
#                                   absent)

free_port() { /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

wait_for() {
	local end=$(($(date +%s) + $1 * ${scale:-1}))
	shift
	until "$@"; do
		[ "$(date +%s)" -lt "$end" ] || return 1
		sleep 0.5
	done
}

prom_start() {
	mkdir -p "$T/prom"
	/usr/bin/python3 - "$t_repo/deploy/monitoring/volagent.rules.yml" "$T/rules.yml" <<'PY'
import sys, yaml
rules = yaml.safe_load(open(sys.argv[1]))
for g in rules["groups"]:
    for r in g["rules"]:
        if "for" in r:
            r["for"] = "5s"
yaml.safe_dump(rules, open(sys.argv[2], "w"))
PY
	cat >"$T/prometheus.yml" <<YML
global: { scrape_interval: 1s, evaluation_interval: 1s }
rule_files: [ "$T/rules.yml" ]
scrape_configs:
  - job_name: volagent
    static_configs: [ { targets: [ "$1" ] } ]
YML
	prom_port=$(free_port)
	prometheus --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/prom" \
		--web.listen-address="127.0.0.1:$prom_port" >"$T/prom.log" 2>&1 &
	prom_pid=$!
}

alert_state() {
	local s
	s=$(curl -sf "http://127.0.0.1:$prom_port/api/v1/alerts" |
		jq -r --arg n "$1" '[.data.alerts[] | select(.labels.alertname == $n) | .state] | first // "none"') || return 1
	[ "$s" = "$2" ]
}
