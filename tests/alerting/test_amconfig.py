"""alertmanager.yml read as it is (``alerting/amconfig.py``), checked against
the real ``amtool check-config`` (Alertmanager 0.25, Debian): every broken
file here is refused by both, Plait's error naming the key amtool's loader
stops at; every valid one is accepted by both and routes as Alertmanager
routes it."""
from __future__ import annotations

import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
import yaml

from alerting.amconfig import UNLIMITED, load_alertmanager_config, template_set, translate
from alerting.model import Alert
from alerting.routing import muted_at, routes_for
from plait.errors import ConfigError

AMTOOL = shutil.which("amtool")
needs_amtool = pytest.mark.skipif(AMTOOL is None, reason="amtool (prometheus-alertmanager) not installed")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "alertmanager.yml"

#: receivers + route most broken files share
BASE = """
route:
  receiver: a
receivers:
  - name: a
    webhook_configs: [{url: 'http://127.0.0.1:9/a'}]
"""


def slack(keys: str) -> str:
    """A file of one Slack receiver with ``keys`` (flow YAML)."""
    return ("route: {receiver: a}\nreceivers: [{name: a, slack_configs: "
            f"[{{api_url: 'http://127.0.0.1:9/s', {keys}}}]}}]\n")


def routed(sub: str) -> str:
    """BASE with one sub-route (flow YAML)."""
    return BASE.replace("  receiver: a\n", f"  receiver: a\n  routes: [{sub}]\n", 1)


def amtool_check(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([AMTOOL, "check-config", str(path)], capture_output=True, text=True,
                          timeout=30)


def write(tmp_path: Path, text: str, name: str = "alertmanager.yml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


# (id, file, the key Plait names, what amtool says)
BROKEN = [
    ("unknown-top-level", BASE + "foo: 1\n", "foo: field foo not found", "field foo not found"),
    ("no-route", "receivers: [{name: a}]\n", "route: no route provided", "no route"),
    ("root-without-receiver", "route: {group_wait: 1s}\nreceivers: [{name: a}]\n",
     "route.receiver: root route must specify a default receiver", "must specify a default receiver"),
    ("undefined-receiver", routed("{receiver: nope}"),
     'route.routes.0.receiver: undefined receiver "nope"', 'undefined receiver "nope"'),
    ("root-matchers", "route: {receiver: a, matchers: ['x=\"1\"']}\nreceivers: [{name: a}]\n",
     "route.matchers: root route must not have any matchers", "root route must not have any matchers"),
    ("root-match", "route: {receiver: a, match: {x: '1'}}\nreceivers: [{name: a}]\n",
     "route.match: root route must not have any matchers", "root route must not have any matchers"),
    ("root-continue", "route: {receiver: a, continue: true}\nreceivers: [{name: a}]\n",
     "route.continue: cannot have continue in root route", "cannot have continue in root route"),
    ("root-mute", "route: {receiver: a, mute_time_intervals: [n]}\nreceivers: [{name: a}]\n"
     "time_intervals: [{name: n, time_intervals: [{weekdays: [monday]}]}]\n",
     "route.mute_time_intervals: root route must not have any mute time intervals",
     "must not have any mute time intervals"),
    ("duplicate-receiver", "route: {receiver: a}\nreceivers: [{name: a}, {name: a}]\n",
     'receivers.1.name: notification config name "a" is not unique', 'name "a" is not unique'),
    ("receiver-without-name", "route: {receiver: a}\nreceivers: [{name: a}, {webhook_configs: []}]\n",
     "receivers.1.name: missing name in receiver", "missing name in receiver"),
    ("group-by-twice", "route: {receiver: a, group_by: [x, y, x]}\nreceivers: [{name: a}]\n",
     "route.group_by: duplicated label 'x' in group_by", 'duplicated label "x" in group_by'),
    ("group-by-wildcard-and-label", "route: {receiver: a, group_by: ['...', x]}\nreceivers: [{name: a}]\n",
     "route.group_by: cannot have wildcard group_by", "cannot have wildcard group_by"),
    ("repeat-interval-zero", "route: {receiver: a, routes: [{receiver: a, repeat_interval: 0s}]}\n"
     "receivers: [{name: a}]\n", "route.routes.0.repeat_interval: repeat_interval cannot be zero",
     "repeat_interval cannot be zero"),
    ("group-interval-zero", "route: {receiver: a, group_interval: 0s}\nreceivers: [{name: a}]\n",
     "route.group_interval: group_interval cannot be zero", "group_interval cannot be zero"),
    ("bad-duration", "route: {receiver: a, group_wait: 30 seconds}\nreceivers: [{name: a}]\n",
     'route.group_wait: not a valid duration string: "30 seconds"', "not a valid duration string"),
    ("fractional-duration", "route: {receiver: a, group_wait: 1.5s}\nreceivers: [{name: a}]\n",
     'route.group_wait: not a valid duration string: "1.5s"', "not a valid duration string"),
    ("undefined-time-interval", "route: {receiver: a, routes: [{receiver: a, mute_time_intervals: [night]}]}\n"
     "receivers: [{name: a}]\n", 'route.routes.0.mute_time_intervals.0: undefined time interval "night"',
     'undefined time interval "night"'),
    ("undefined-active-interval", "route: {receiver: a, routes: [{active_time_intervals: [day]}]}\n"
     "receivers: [{name: a}]\n", 'route.routes.0.active_time_intervals.0: undefined time interval "day"',
     'undefined time interval "day"'),
    ("duplicate-time-interval", "route: {receiver: a}\nreceivers: [{name: a}]\n"
     "mute_time_intervals: [{name: n, time_intervals: [{weekdays: [monday]}]}]\n"
     "time_intervals: [{name: n, time_intervals: [{weekdays: [friday]}]}]\n",
     'time_intervals.0.name: time interval "n" is not unique', 'time interval "n" is not unique'),
    ("time-interval-without-name", "route: {receiver: a}\nreceivers: [{name: a}]\n"
     "time_intervals: [{time_intervals: [{weekdays: [monday]}]}]\n",
     "time_intervals.0.name: missing name in time interval", "missing name in time interval"),
    ("bad-weekday", "route: {receiver: a}\nreceivers: [{name: a}]\n"
     "time_intervals: [{name: n, time_intervals: [{weekdays: [funday]}]}]\n",
     "time_intervals.0.time_intervals.0.weekdays: unknown weekday 'funday'", "funday"),
    ("weekend-backwards", "route: {receiver: a}\nreceivers: [{name: a}]\n"
     "time_intervals: [{name: n, time_intervals: [{weekdays: ['saturday:sunday']}]}]\n",
     "time_intervals.0.time_intervals.0.weekdays: start day cannot be before end day",
     "start day cannot be before end day"),
    ("times-backwards", "route: {receiver: a}\nreceivers: [{name: a}]\n"
     "time_intervals: [{name: n, time_intervals: [{times: [{start_time: '18:00', end_time: '08:00'}]}]}]\n",
     "time_intervals.0.time_intervals.0.times.0: start time cannot be equal or greater than end time",
     "start time cannot be equal or greater than end time"),
    ("months-backwards", "route: {receiver: a}\nreceivers: [{name: a}]\n"
     "time_intervals: [{name: n, time_intervals: [{months: ['december:january']}]}]\n",
     "end month january is before start month december", "is before start month"),
    ("bad-location", "route: {receiver: a}\nreceivers: [{name: a}]\n"
     "time_intervals: [{name: n, time_intervals: [{location: Mars/Olympus}]}]\n",
     "time_intervals.0.time_intervals.0.location: unknown time zone", "Mars/Olympus"),
    ("bad-time", "route: {receiver: a}\nreceivers: [{name: a}]\n"
     "time_intervals: [{name: n, time_intervals: [{times: [{start_time: '25:00', end_time: '26:00'}]}]}]\n",
     "time_intervals.0.time_intervals.0.times.0.start_time", "25:00"),
    ("email-without-smarthost", "route: {receiver: a}\nreceivers: [{name: a, email_configs: [{to: x@example.org, from: y@example.org}]}]\n",
     "receivers.0.email_configs.0.smarthost: no global SMTP smarthost set", "no global SMTP smarthost set"),
    ("email-without-from", "global: {smtp_smarthost: 'localhost:25'}\nroute: {receiver: a}\n"
     "receivers: [{name: a, email_configs: [{to: x@example.org}]}]\n",
     "receivers.0.email_configs.0.from: no global SMTP from set", "no global SMTP from set"),
    ("email-without-to", "global: {smtp_smarthost: 'localhost:25', smtp_from: a@example.org}\n"
     "route: {receiver: a}\nreceivers: [{name: a, email_configs: [{html: x}]}]\n",
     "receivers.0.email_configs.0.to: missing to address in email config", "missing to address"),
    ("smarthost-without-port", "global: {smtp_smarthost: 'localhost', smtp_from: a@example.org}\n"
     "route: {receiver: a}\nreceivers: [{name: a, email_configs: [{to: x@example.org}]}]\n",
     "global.smtp_smarthost: address localhost: missing port in address", "missing port in address"),
    ("webhook-without-url", "route: {receiver: a}\nreceivers: [{name: a, webhook_configs: [{send_resolved: true}]}]\n",
     "receivers.0.webhook_configs.0.url: missing URL in webhook config", "missing URL in webhook config"),
    ("webhook-url-and-url-file", "route: {receiver: a}\nreceivers: [{name: a, webhook_configs: "
     "[{url: 'http://127.0.0.1:9/a', url_file: /tmp/x}]}]\n",
     "receivers.0.webhook_configs.0.url_file: at most one of url & url_file", "url_file"),
    ("webhook-bad-scheme", "route: {receiver: a}\nreceivers: [{name: a, webhook_configs: [{url: 'ftp://127.0.0.1/a'}]}]\n",
     'receivers.0.webhook_configs.0.url: unsupported scheme "ftp" for URL', 'unsupported scheme "ftp"'),
    ("template-glob-syntax", "templates: ['t/[a.tmpl']\nroute: {receiver: a}\nreceivers: [{name: a}]\n",
     "templates.0: syntax error in pattern", "syntax error in pattern"),
    ("merged-key-twice-in-a-map", routed("{match: {team: web, <<: {team: db}}}"),
     'key "team" already set in map', 'key "team" already set in map'),
    ("merged-map-key-twice", routed("{<<: {match: {team: db}}, match: {team: web}}"),
     'key "team" already set in map', 'key "team" already set in map'),
    ("binary-not-base64", routed('{match: {team: !!binary "ZG I="}}'),
     "!!binary value contains invalid base64 data", "!!binary value contains invalid base64 data"),
    ("webhook-unknown-field", "route: {receiver: a}\nreceivers: [{name: a, webhook_configs: [{urll: 'http://127.0.0.1/a'}]}]\n",
     "receivers.0.webhook_configs.0.urll: field urll not found", "field urll not found"),
    ("route-unknown-field", routed("{recevier: a}"),
     "route.routes.0.recevier: field recevier not found", "field recevier not found"),
    ("inhibit-unknown-field", BASE + "inhibit_rules: [{source_matcher: ['a=\"1\"']}]\n",
     "inhibit_rules.0.source_matcher: field source_matcher not found", "field source_matcher not found"),
    ("bad-matcher", routed("{matchers: [severity]}"),
     "route.routes.0.matchers.0:", "bad matcher format"),
    ("bad-match-re", routed("{match_re: {service: '(mysql'}}"),
     "route.routes.0.match_re.service:", "missing closing )"),
    # Alertmanager's config/testdata/conf.nil-match_re-route.yml and its inhibition twins
    ("nil-match_re-route", routed("{match_re: {invalid_label: null}}"),
     'route.routes.0.match_re.invalid_label: invalid regexp value for "invalid_label"',
     'invalid regexp value for "invalid_label"'),
    ("nil-source_match_re-inhibition", BASE + "inhibit_rules: [{source_match_re: "
     "{invalid_label: null}, target_match: {a: b}}]\n",
     'inhibit_rules.0.source_match_re.invalid_label: invalid regexp value for "invalid_label"',
     'invalid regexp value for "invalid_label"'),
    ("nil-target_match_re-inhibition", BASE + "inhibit_rules: [{target_match_re: "
     "{invalid_label: null}, source_match: {a: b}}]\n",
     'inhibit_rules.0.target_match_re.invalid_label: invalid regexp value for "invalid_label"',
     'invalid regexp value for "invalid_label"'),
    ("duration-out-of-range", routed("{receiver: a, repeat_interval: 293y}"),
     "route.routes.0.repeat_interval: duration out of range", "duration out of range"),
    ("bad-label-name-in-match", routed("{match: {1team: db}}"),
     'route.routes.0.match.1team: invalid label name "1team"', 'invalid label name "1team"'),
    # (a name such as foo-bar is refused by 0.25 and taken by 0.28's UTF-8 mode, as Plait takes it)
    ("null-in-group_by", routed("{group_by: [null]}"),
     'route.routes.0.group_by: invalid label name "" in group_by list',
     'invalid label name "" in group_by list'),
    # Alertmanager's loader crashes on a null route; Plait names it
    ("null-route", routed("null"), "route.routes.0: expected a route, got null",
     "nil pointer dereference"),
    ("pagerduty-without-key", "route: {receiver: a}\nreceivers: [{name: a, pagerduty_configs: [{description: x}]}]\n",
     "receivers.0.pagerduty_configs.0.routing_key: missing service or routing key", "missing service or routing key"),
    ("slack-without-url", "route: {receiver: a}\nreceivers: [{name: a, slack_configs: [{channel: '#x'}]}]\n",
     "receivers.0.slack_configs.0.api_url: no global Slack API URL set", "no global Slack API URL set"),
    # Slack's actions and fields (config/notifiers.go SlackAction, SlackConfirmationField and
    # SlackField UnmarshalYAML)
    ("slack-action-without-name-or-url", slack("actions: [{type: button, text: Ack}]"),
     "receivers.0.slack_configs.0.actions.0: missing name or url in Slack action configuration",
     "missing name or url in Slack action configuration"),
    ("slack-action-without-type", slack("actions: [{text: Ack, url: 'http://x'}]"),
     "receivers.0.slack_configs.0.actions.0.type: missing type in Slack action configuration",
     "missing type in Slack action configuration"),
    ("slack-action-without-text", slack("fields: [{title: t, value: v}], "
                                        "actions: [{type: button, text: Ack, name: ack}, {type: button}]"),
     "receivers.0.slack_configs.0.actions.1.text: missing text in Slack action configuration",
     "missing text in Slack action configuration"),
    ("slack-confirm-without-text", slack("actions: [{type: button, text: Ack, url: 'http://x', "
                                         "confirm: {title: Sure}}]"),
     "receivers.0.slack_configs.0.actions.0.confirm.text: missing text in Slack confirmation",
     "missing text in Slack confirmation configuration"),
    ("slack-action-unknown-field", slack("actions: [{type: button, text: Ack, name: ack, "
                                         "urll: 'http://x'}]"),
     "receivers.0.slack_configs.0.actions.0.urll: field urll not found", "field urll not found"),
    ("slack-action-not-a-string", slack("actions: [{type: [button], text: Ack, name: ack}]"),
     "receivers.0.slack_configs.0.actions.0.type: expected a string", "cannot unmarshal !!seq"),
    ("slack-field-without-title", slack("fields: [{value: v}]"),
     "receivers.0.slack_configs.0.fields.0.title: missing title in Slack field configuration",
     "missing title in Slack field configuration"),
    ("slack-field-without-value", slack("fields: [{title: t}]"),
     "receivers.0.slack_configs.0.fields.0.value: missing value in Slack field configuration",
     "missing value in Slack field configuration"),
    ("slack-field-short-not-a-bool", slack("fields: [{title: t, value: v, short: 'true'}]"),
     "receivers.0.slack_configs.0.fields.0.short: expected true or false",
     "cannot unmarshal !!str `true` into bool"),
    ("slack-short-fields-not-a-bool", slack("short_fields: maybe"),
     "receivers.0.slack_configs.0.short_fields: expected true or false",
     "cannot unmarshal !!str `maybe` into bool"),
    ("slack-mrkdwn-in-not-a-list", slack("mrkdwn_in: text"),
     "receivers.0.slack_configs.0.mrkdwn_in: expected a list", "cannot unmarshal !!str `text`"),
    ("opsgenie-responder-without-name",
     "route: {receiver: a}\nreceivers: [{name: a, opsgenie_configs: [{api_key: k, "
     "responders: [{type: team}]}]}]\n",
     "receivers.0.opsgenie_configs.0.responders.0: has to have at least one of id, username or name",
     "has to have at least one of id, username or name specified"),
    ("opsgenie-responder-type-template",
     "route: {receiver: a}\nreceivers: [{name: a, opsgenie_configs: [{api_key: k, "
     "responders: [{type: '{{ .Foo ', name: ops}]}]}]\n",
     "receivers.0.opsgenie_configs.0.responders.0.type: is not a valid template",
     "type is not a valid template"),
    ("opsgenie-responder-type",
     "route: {receiver: a}\nreceivers: [{name: a, opsgenie_configs: [{api_key: k, "
     "responders: [{type: bogus, name: ops}]}]}]\n",
     "receivers.0.opsgenie_configs.0.responders.0.type: 'bogus' does not match valid options",
     "type does not match valid options"),
    ("opsgenie-without-key", "route: {receiver: a}\nreceivers: [{name: a, opsgenie_configs: [{message: x}]}]\n",
     "receivers.0.opsgenie_configs.0.api_key: no global OpsGenie API Key set", "no global OpsGenie API Key set"),
    ("duplicate-yaml-key", "route:\n  receiver: a\n  receiver: b\nreceivers: [{name: a}, {name: b}]\n",
     "line 3: field receiver already set", "field receiver already set"),
    ("basic-auth-and-bearer", "route: {receiver: a}\nreceivers: [{name: a, webhook_configs: [{url: 'http://127.0.0.1:9/a', "
     "http_config: {basic_auth: {username: u, password: p}, bearer_token: t}}]}]\n",
     "receivers.0.webhook_configs.0.http_config.bearer_token: at most one of basic_auth",
     "at most one of basic_auth"),
    ("not-a-mapping", "- just\n- a list\n", "(top level): expected a mapping", "cannot unmarshal"),
]


@needs_amtool
@pytest.mark.parametrize("text,plait_says,amtool_says", [c[1:] for c in BROKEN],
                         ids=[c[0] for c in BROKEN])
def test_amtool_and_plait_refuse_the_same_file_naming_the_same_key(tmp_path, text, plait_says,
                                                                    amtool_says):
    path = write(tmp_path, text)
    am = amtool_check(path)
    assert am.returncode != 0, f"amtool accepted it:\n{am.stdout}"
    assert amtool_says in am.stdout + am.stderr
    with pytest.raises(ConfigError) as err:
        load_alertmanager_config(path)
    assert plait_says in str(err.value)


def am_alert(**labels: str) -> Alert:
    from alerting.intake import from_alertmanager_alert

    return from_alertmanager_alert({"labels": labels}, 1_000_000.0)


def receivers_for(config, **labels: str) -> list[str]:
    return [r.receiver for r in routes_for(config, am_alert(**labels).match_labels())]


VALID = {
    "minimal": ("route: {receiver: a}\nreceivers: [{name: a}]\n",
                lambda c: receivers_for(c, alertname="X") == ["a"] and c.receivers[0].type == "none"),
    "nested-inheritance": ("""
        route:
          receiver: default
          group_by: [alertname]
          group_wait: 5s
          routes:
            - match: {team: db}
              receiver: dba
              group_interval: 1m
              routes:
                - matchers: ['env="dev"']
                  group_by: ['...']
            - matchers: ['severity="critical"']
              receiver: pager
              continue: true
            - matchers: ['severity=~"critical|warning"']
              receiver: chat
        receivers:
          - {name: default, webhook_configs: [{url: 'http://127.0.0.1:9/d'}]}
          - {name: dba, webhook_configs: [{url: 'http://127.0.0.1:9/dba'}]}
          - {name: pager, webhook_configs: [{url: 'http://127.0.0.1:9/p'}]}
          - {name: chat, webhook_configs: [{url: 'http://127.0.0.1:9/c'}]}
        """, lambda c: (
            receivers_for(c, alertname="X", team="db", env="dev") == ["dba"]
            and receivers_for(c, alertname="X", severity="critical") == ["pager", "chat"]
            and receivers_for(c, alertname="X", severity="info") == ["default"]
            # inherited: the dev route keeps dba's group_interval and the root's group_wait
            and [(r.group_by, r.group_wait, r.group_interval) for r in routes_for(
                c, am_alert(alertname="X", team="db", env="dev").match_labels())]
            == [(("...",), 5.0, 60.0)])),
    "example": (EXAMPLE.read_text(encoding="utf-8"), lambda c: (
        receivers_for(c, alertname="DiskFull", severity="critical", team="db", service="mysql")
        == ["pager-webhook", "dba-mail"]
        and receivers_for(c, alertname="Watchdog") == ["blackhole"]
        and len(c.inhibit_rules) == 2 and c.inhibit_rules[1].source_matchers == ['alertname="NodeDown"'])),
    "globals-and-kinds": ("""
        global:
          resolve_timeout: 1h30m
          smtp_smarthost: '127.0.0.1:2525'
          smtp_from: am@example.org
          smtp_auth_username: am
          smtp_auth_password: pw
          slack_api_url: 'http://127.0.0.1:9/slack'
          opsgenie_api_key: genie
          opsgenie_api_url: 'http://127.0.0.1:9/og/'
          pagerduty_url: 'http://127.0.0.1:9/pd'
          http_config:
            authorization: {credentials: global-token}
        route: {receiver: mail}
        receivers:
          - {name: mail, email_configs: [{to: 'a@example.org, b@example.org'}]}
          - {name: chat, slack_configs: [{channel: '#ops', title: '{{ .CommonLabels.alertname }}'}]}
          - {name: genie, opsgenie_configs: [{priority: P2}]}
          - {name: pd, pagerduty_configs: [{routing_key: rk, send_resolved: false}]}
          - name: hook
            webhook_configs:
              - url: 'http://127.0.0.1:9/h'
                max_alerts: 5
                http_config: {basic_auth: {username: u, password: p}}
        """, lambda c: (
            c.timing.resolve_timeout == 5400.0
            and c.receiver("mail").email.to == ["a@example.org", "b@example.org"]
            and c.receiver("mail").email.auth_password == "pw" and c.receiver("mail").send_resolved is False
            and c.receiver("chat").url == "http://127.0.0.1:9/slack"
            and c.receiver("chat").alertmanager_fields["title"] == "{{ .CommonLabels.alertname }}"
            and c.receiver("chat").headers == {"Authorization": "Bearer global-token"}
            and c.receiver("genie").url == "http://127.0.0.1:9/og/v2/alerts"
            and c.receiver("genie").api_key == "genie"
            and c.receiver("pd").url == "http://127.0.0.1:9/pd" and not c.receiver("pd").send_resolved
            and c.receiver("hook").headers == {"Authorization": "Basic dTpw"}
            and c.receiver("hook").max_alerts == 5 and c.receiver("hook").format == "alertmanager")),
    # gopkg.in/yaml.v2 gives a string field a plain scalar's text, where YAML 1.1 reads a bool,
    # a number or a sexagesimal (the times are configuration.md's own example)
    "yaml-1.1-scalars-are-text": ("""
        route:
          receiver: a
          routes: [{receiver: a, match: {paging: yes, v: 1.10, code: 010, continue: on},
                    continue: true,
                    active_time_intervals: [office]}]
        receivers: [{name: a, webhook_configs: [{url: 'http://127.0.0.1:9/a', max_alerts: 3}]}]
        time_intervals:
          - name: office
            time_intervals:
              - times: [{start_time: 09:00, end_time: 17:00}]
                days_of_month: [1, '3:5']
                months: [12]
                years: [2026]
        """, lambda c: (
            sorted(c.route.routes[0].matchers) == ['code="010"', 'continue="on"', 'paging="yes"',
                                                   'v="1.10"']
            and c.route.routes[0].continue_ is True and c.receiver("a").max_alerts == 3
            and c.time_intervals[0].time_intervals[0].times[0].start_time == "09:00"
            and c.time_intervals[0].time_intervals[0].times[0].end_time == "17:00"
            and c.time_intervals[0].time_intervals[0].days_of_month == ["1", "3:5"]
            and c.time_intervals[0].time_intervals[0].years == ["2026"])),
    # yaml.v2 decodes an alias anew into each place (text in a match, a bool in send_resolved),
    # reads y and n as booleans, and takes 5.0 for an integer
    "yaml-aliases-and-go-booleans": ("""
        receivers:
          - name: a
            webhook_configs:
              - {url: 'http://127.0.0.1:9/a', send_resolved: &t true, max_alerts: 5.0}
              - {url: 'http://127.0.0.1:9/b', send_resolved: &y yes}
          - name: b
            webhook_configs: [{url: 'http://127.0.0.1:9/c', send_resolved: n}]
        route:
          receiver: a
          routes: [{receiver: b, match: {paging: *t, ack: *y}}]
        """, lambda c: (
            sorted(c.route.routes[0].matchers) == ['ack="yes"', 'paging="true"']
            and c.receiver("a").send_resolved is True and c.receiver("a").max_alerts == 5
            and c.receiver("a.1").send_resolved is True
            and c.receiver("b").send_resolved is False)),
    # an empty group_by leaves Alertmanager's Route.GroupBy nil: the parent's is inherited
    "empty-group-by-inherits": ("""
        route:
          receiver: a
          group_by: [alertname]
          routes: [{receiver: a, group_by: [], matchers: [team=x]}]
        receivers: [{name: a}]
        """, lambda c: [r.group_by for r in routes_for(c, {"alertname": "X", "team": "x"})]
        == [("alertname",)]),
    # an interval without entries never matches: the route active only in it stays muted
    "empty-time-interval": ("""
        route:
          receiver: a
          routes: [{receiver: a, matchers: [team=x], active_time_intervals: [never]}]
        receivers: [{name: a}]
        time_intervals: [{name: never}]
        """, lambda c: c.time_intervals[0].time_intervals == []
        and muted_at(c, routes_for(c, {"alertname": "X", "team": "x"})[0], 1_800_000_000.0)),
    # gopkg.in/yaml.v2's Unmarshal reads the first document of the file
    "second-document-ignored": ("""
        route: {receiver: a}
        receivers: [{name: a}]
        ---
        route: {receiver: nobody}
        """, lambda c: c.route.receiver == "a"),
    "deprecated-mute-time-intervals": ("""
        route:
          receiver: a
          routes: [{matchers: ['x="1"'], mute_time_intervals: [old, new]}]
        receivers: [{name: a}]
        mute_time_intervals:
          - {name: old, time_intervals: [{weekdays: ['sunday:saturday'], years: ['2020:2030']}]}
        time_intervals:
          - {name: new, time_intervals: [{months: ['december'], days_of_month: ['24:26']}]}
        """, lambda c: [t.name for t in c.time_intervals] == ["old", "new"]
        and c.time_intervals[0].time_intervals[0].years == ["2020:2030"]),
}


@needs_amtool
@pytest.mark.parametrize("name", list(VALID))
def test_amtool_and_plait_accept_the_same_valid_file_and_it_routes_as_alertmanager(tmp_path, name):
    text, check = VALID[name]
    path = write(tmp_path, text)
    am = amtool_check(path)
    assert am.returncode == 0, am.stdout + am.stderr
    config = load_alertmanager_config(path)
    assert check(config)


SEVERITY_ROUTES = """
route:
  receiver: chat
  routes:
  - matchers: ['severity="page"']
    receiver: pager
  - matchers: ['severity=~"P[12]"']
    receiver: oncall
  - matchers: ['severity="critical"']
    receiver: crit
  - matchers: ['rule="disk"']
    receiver: rules
receivers: [{name: chat}, {name: pager}, {name: oncall}, {name: crit}, {name: rules}]
"""


@needs_amtool
@pytest.mark.parametrize("labels", [
    {"severity": "page"}, {"severity": "P1"}, {"severity": "high"}, {"severity": "ticket"},
    {"severity": "critical"}, {"rule": "disk"}, {}], ids=repr)
def test_an_alerts_labels_route_as_sent_as_amtool_routes_them(tmp_path, labels):
    # Plait's severity aliases (page, high: critical) and its rule label are its own: the labels
    # of an Alertmanager alert are matched as they were sent
    path = write(tmp_path, SEVERITY_ROUTES)
    args = [f"{k}={v}" for k, v in {"alertname": "A", **labels}.items()]
    am = subprocess.run([AMTOOL, "config", "routes", "test", f"--config.file={path}", *args],
                        capture_output=True, text=True, timeout=30)
    assert am.returncode == 0, am.stderr
    assert receivers_for(load_alertmanager_config(path), alertname="A", **labels) == [
        am.stdout.strip()]


MERGED_ROUTES = """
route:
  receiver: a
  routes:
  - &base
    receiver: c
    continue: true
    matchers: ['team="a"']
    match: {x: '1'}
  - <<: *base
    matchers: ['sev="page"']
    match: {y: '2'}
    receiver: b
receivers: [{name: a}, {name: b}, {name: c}]
"""
#: An alias takes the types of each place it is merged into: a route's ``continue`` is text in a
#: ``match`` map, and a ``match`` map's ``continue: true`` is a bool in a route.
MERGED_TYPES = """
route:
  receiver: a
  routes:
  - &r {receiver: b, continue: true}
  - match: {<<: *r}
    receiver: c
    continue: true
  - match: &flags {continue: true}
    receiver: d
  - <<: *flags
    receiver: e
    matchers: ['x="1"']
  - {receiver: f, matchers: ['x="1"']}
receivers: [{name: a}, {name: b}, {name: c}, {name: d}, {name: e}, {name: f}]
"""
#: The merge after an explicit key: yaml.v2 goes in document order, the merged receiver wins.
MERGED_LAST = """
route:
  receiver: a
  routes:
  - &base {receiver: c, continue: true, matchers: ['team="a"']}
  - {receiver: b, <<: *base}
receivers: [{name: a}, {name: b}, {name: c}]
"""


#: ``!!binary`` scalars: yaml.v2 decodes their bytes into the string fields (here "b", "hello").
BINARY = """
route:
  receiver: a
  routes:
  - {receiver: !!binary Yg==, match: {x: !!binary aGVsbG8=}}
  - {receiver: c, matchers: [!!binary eT0iaGVsbG8i]}
receivers: [{name: a}, {name: b}, {name: c}]
"""


@needs_amtool
@pytest.mark.parametrize("text,labels", [
    (BINARY, {"x": "hello"}), (BINARY, {"y": "hello"}), (BINARY, {"x": "aGVsbG8="}),
    (MERGED_ROUTES, {"sev": "page", "y": "2"}), (MERGED_ROUTES, {"team": "a", "sev": "page", "y": "2"}),
    (MERGED_ROUTES, {"team": "a", "sev": "page", "x": "1", "y": "2"}),
    (MERGED_ROUTES, {"team": "a", "x": "1"}), (MERGED_LAST, {"team": "a"}),
    (MERGED_TYPES, {"receiver": "b", "continue": "true"}), (MERGED_TYPES, {"x": "1"})],
    ids=["binary-match", "binary-matchers", "binary-undecoded", "sev-y", "team-sev-y", "all",
         "team-x", "merge-last", "merged-into-a-map", "merged-from-a-map"])
def test_merge_keys_and_binary_values_decode_as_alertmanager_reads_them(tmp_path, text, labels):
    # yaml.v2 decodes the explicit keys into what the merge set: Matchers.UnmarshalYAML appends
    # and a map[string]string takes the new keys, so route b needs team, sev, x and y
    path = write(tmp_path, text)
    args = [f"{k}={v}" for k, v in labels.items()]
    am = subprocess.run([AMTOOL, "config", "routes", "test", f"--config.file={path}", *args],
                        capture_output=True, text=True, timeout=30)
    assert am.returncode == 0, am.stderr
    assert ",".join(receivers_for(load_alertmanager_config(path), **labels)) == am.stdout.strip()


def test_without_a_plait_block_the_file_behaves_as_alertmanager():
    """No rate limit, no cooldown, one group per message, no split below
    MAX_BATCH: Plait's extras are off."""
    c = load_alertmanager_config(EXAMPLE)
    assert {(r.bucket.burst, r.bucket.refill_interval) for r in c.receivers} == {
        (UNLIMITED["burst"], UNLIMITED["refill_interval"])}
    assert c.dedupe.cooldown == 0 and c.grouping.merge_groups is False and c.ledger is False
    assert c.grouping.batch_size == 10_000
    assert c.grouping.group_by == ["alertname", "cluster", "service"]


def test_the_plait_block_in_its_own_file_or_in_the_file(tmp_path):
    extras = EXAMPLE.parent / "alertmanager-plait.yml"
    c = load_alertmanager_config(EXAMPLE, extras)
    assert c.receiver("pager-webhook").bucket.burst == 10 and c.receiver("pager-webhook").secret
    assert c.receiver("ops-webhook").format == "native" and c.receiver("blackhole").bucket.burst == 3
    assert c.dedupe.cooldown == 300 and c.grouping.merge_groups and c.grouping.batch_size == 50
    assert c.ledger is True
    inline = dict(yaml.safe_load(EXAMPLE.read_text()), **yaml.safe_load(extras.read_text()))
    assert translate(inline, EXAMPLE.parent).receiver("pager-webhook").bucket.burst == 10
    with pytest.raises(ConfigError, match="plait: given twice"):
        translate(inline, EXAMPLE.parent, {"dedupe": {"cooldown": "1m"}})
    with pytest.raises(ConfigError, match=r"plait.receivers.nobody: no receiver 'nobody'"):
        translate(yaml.safe_load(EXAMPLE.read_text()), EXAMPLE.parent, {"receivers": {"nobody": {}}})
    assert translate(yaml.safe_load(EXAMPLE.read_text()), EXAMPLE.parent,
                     {"dedupe": {"suppress_transient": True}}).dedupe.cooldown == 0
    with pytest.raises(ConfigError, match=r"plait.dedupe.cooldwn"):
        translate(yaml.safe_load(EXAMPLE.read_text()), EXAMPLE.parent, {"dedupe": {"cooldwn": "1m"}})


def test_files_and_templates_are_relative_to_the_config_file(tmp_path):
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "url").write_text("http://127.0.0.1:9/from-file\n")
    (tmp_path / "secrets" / "token").write_text("tok\n")
    (tmp_path / "tmpl").mkdir()
    for name in ("b.tmpl", "a.tmpl", "skip.txt"):
        (tmp_path / "tmpl" / name).write_text('{{ define "x" }}x{{ end }}')
    path = write(tmp_path, """
        templates: ['tmpl/*.tmpl']
        route: {receiver: a}
        receivers:
          - name: a
            webhook_configs:
              - url_file: secrets/url
                http_config: {authorization: {type: Token, credentials_file: secrets/token}}
        """)
    c = load_alertmanager_config(path)
    assert c.receiver("a").url == "http://127.0.0.1:9/from-file"
    assert c.receiver("a").headers == {"Authorization": "Token tok"}
    assert c.templates == [str(tmp_path / "tmpl" / "a.tmpl"), str(tmp_path / "tmpl" / "b.tmpl")]


@needs_amtool
@pytest.mark.parametrize("pattern,loads", [("t/a\\[1\\].tmpl", True), ("t/*.tmpl", False),
                                           ("t/s*", False)],
                         ids=["escaped-bracket", "both-files", "a-directory"])
def test_template_files_are_read_as_the_glob_found_them(tmp_path, pattern, loads):
    # a[1].tmpl is valid, a1.tmpl is not: a file is read as named, never globbed again; a
    # directory matched is an error (Go's ReadFile), as amtool check-config says
    (tmp_path / "t" / "sub").mkdir(parents=True)
    (tmp_path / "t" / "a[1].tmpl").write_text('{{ define "x" }}x{{ end }}')
    (tmp_path / "t" / "a1.tmpl").write_text("{{ end }}")
    path = write(tmp_path, f"templates: ['{pattern}']\nroute: {{receiver: a}}\nreceivers: [{{name: a}}]\n")
    assert (amtool_check(path).returncode == 0) is loads
    if loads:
        assert template_set(load_alertmanager_config(path)) is not None
    else:
        with pytest.raises(ConfigError, match=r"^templates: "):
            template_set(load_alertmanager_config(path))


@needs_amtool
@pytest.mark.parametrize("url", [
    "http://127.0.0.1:9/a ", "http://h/#a\tb", "http://h/?q=%zz", "http://%c3%a9.example/",
    "http://[::1]:9/a", "http://a]b/", "http://[foo]/", "http://user@/x", "http://h:abc/x",
    "http://a:b:c/", "http://[::1]x/", "http://ex%41mple.com/", "http://h/a%zz", "http://h/#%zz",
    "http://us er@h/", "http://us%zzer@h/", "http://[::1/", " http://h/", "http://h h/",
    "http://h/a\x01"], ids=repr)
def test_a_url_is_taken_or_refused_as_alertmanager_does(tmp_path, url):
    # Go's url.Parse, then parseURL's scheme and host checks: amtool's word for each
    import json as _json

    path = write(tmp_path, "route: {receiver: a}\nreceivers: [{name: a, webhook_configs: "
                           f"[{{url: {_json.dumps(url)}}}]}}]\n")
    am = amtool_check(path)
    if am.returncode == 0:
        assert load_alertmanager_config(path).receiver("a").url == url
        return
    said = (am.stdout + am.stderr).split("FAILED: ", 1)[1].splitlines()[0]
    with pytest.raises(ConfigError) as err:
        load_alertmanager_config(path)
    assert said.rpartition(": ")[2] in str(err.value), (said, str(err.value))


def test_a_webhook_url_is_taken_as_written(tmp_path):
    # Go's url.Parse keeps a trailing space in the path (amtool check-config accepts the file)
    path = write(tmp_path, """
        route: {receiver: a}
        receivers: [{name: a, webhook_configs: [{url: 'http://127.0.0.1:9/a '}]}]
        """)
    assert load_alertmanager_config(path).receiver("a").url == "http://127.0.0.1:9/a "


@pytest.mark.parametrize("text,says", [
    ("receivers: [{name: a, webhook_configs: [{url: 'http://127.0.0.1:9/a'}], "
     "slack_configs: [{api_url: 'http://127.0.0.1:9/s'}]}, {name: a.1}]",
     "receivers.0.slack_configs.0: the receiver of this further integration would be named 'a.1'"),
    ("receivers: [{name: a, telegram_configs: [{chat_id: 1}]}]",
     "receivers.0.telegram_configs: not supported: Plait has no telegram receiver"),
    ("receivers: [{name: a, pagerduty_configs: [{service_key: k}]}]",
     "receivers.0.pagerduty_configs.0.service_key: not supported: PagerDuty Events API v1"),
    ("receivers: [{name: a, webhook_configs: [{url: 'http://127.0.0.1:9/a', "
     "http_config: {tls_config: {server_name: x}}}]}]",
     "receivers.0.webhook_configs.0.http_config.tls_config.server_name: not supported"),
    ("receivers: [{name: a, webhook_configs: [{url: 'http://127.0.0.1:9/a', "
     "http_config: {tls_config: {cert_file: c.pem}}}]}]",
     "receivers.0.webhook_configs.0.http_config.tls_config.key_file: client cert_file and key_file"),
    ("global: {smtp_smarthost: 'localhost:25', smtp_from: a@example.org}\n"
     "receivers: [{name: a, email_configs: [{to: b@example.org, http_config: {}}]}]",
     "receivers.0.email_configs.0.http_config: field http_config not found"),
    ("receivers: [{name: a, webhook_configs: [{url: 'http://127.0.0.1:9/a', "
     "http_config: {proxy_url: 'http://127.0.0.1:3128'}}]}]",
     "receivers.0.webhook_configs.0.http_config.proxy_url: not supported"),
    ("receivers: [{name: a, slack_configs: [{api_url: 'http://127.0.0.1:9/s', timeout: 5s}]}]",
     "receivers.0.slack_configs.0.timeout: not supported"),
    ("receivers: [{name: a, webhook_configs: [{url: 'http://127.0.0.1:9/a', timeout: 5}]}]",
     "receivers.0.webhook_configs.0.timeout: not a valid duration string"),
    ("global: {resolve_timeout: 0s}\nreceivers: [{name: a}]",
     "global.resolve_timeout: must be more than 0s"),
    # Alertmanager's loader takes a null action or field, which its notifier then dereferences
    ("receivers: [{name: a, slack_configs: [{api_url: 'http://127.0.0.1:9/s', actions: [null]}]}]",
     "receivers.0.slack_configs.0.actions.0: expected a Slack action, got null"),
    ("receivers: [{name: a, slack_configs: [{api_url: 'http://127.0.0.1:9/s', fields: [~]}]}]",
     "receivers.0.slack_configs.0.fields.0: expected a Slack field, got null"),
])
def test_what_plait_cannot_do_is_refused_naming_the_key(tmp_path, text, says):
    path = write(tmp_path, "route: {receiver: a}\n" + text + "\n")
    with pytest.raises(ConfigError) as err:
        load_alertmanager_config(path)
    assert says in str(err.value)


def test_msteams_configs_become_a_teams_receiver(tmp_path):
    """Alertmanager 0.26+'s ``msteams_configs`` (amtool 0.25 does not know it)."""
    path = write(tmp_path, """
        route: {receiver: t}
        receivers:
          - name: t
            msteams_configs: [{webhook_url: 'http://127.0.0.1:9/teams', title: 'T {{ .Status }}'}]
        """)
    r = load_alertmanager_config(path).receiver("t")
    assert (r.type, r.url, r.send_resolved, r.alertmanager_fields["title"]) == (
        "teams", "http://127.0.0.1:9/teams", True, "T {{ .Status }}")
    assert "# Alerts Firing:" in r.alertmanager_fields["text"]  # 0.26's default text


def _am_file(path: Path, receiver: str) -> Path:
    return write(path.parent, f"""
        route: {{receiver: {receiver}}}
        receivers:
          - {{name: {receiver}, webhook_configs: [{{url: 'http://127.0.0.1:9/{receiver}'}}]}}
        """, path.name)


def test_post_reload_rereads_the_file_behind_the_bearer_gate_and_keeps_it_when_bad(tmp_path):
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from api.app import install_alerting
    from api.envelope import install_error_handlers
    from plait.settings import Settings

    path = _am_file(tmp_path / "alertmanager.yml", "first")
    token = "reload-token-" + "x" * 32
    settings = Settings(alertmanager_config=str(path), alertmanager_token=token,
                        redis_prefix="test-c1-reload", broker_url="127.0.0.1:1")
    app = FastAPI()
    install_error_handlers(app)
    install_alerting(app, settings)
    auth = {"Authorization": f"Bearer {token}"}
    with TestClient(app) as client:
        names = lambda: [r["name"] for r in client.get("/api/v2/receivers", headers=auth).json()]  # noqa: E731
        assert names() == ["first"]
        _am_file(path, "second")
        assert client.post("/-/reload").status_code == 401  # a state change needs the credential
        assert names() == ["first"]
        assert client.post("/-/reload", headers=auth).status_code == 200
        assert names() == ["second"]
        path.write_text("route: {receiver: nobody}\nreceivers: [{name: second}]\n")
        bad = client.post("/-/reload", headers=auth)
        assert bad.status_code == 400
        assert bad.text == 'failed to reload config: route.receiver: undefined receiver "nobody" used in route'
        assert names() == ["second"]  # the configuration in use stays


def test_sighup_reloads_and_a_failing_reload_keeps_the_old_config(caplog):
    import asyncio
    import os
    import signal

    from alerting.amconfig import on_sighup

    calls: list[str] = []

    def reload() -> None:
        calls.append("reload")
        if len(calls) == 2:
            raise ConfigError("route.receiver: undefined receiver")

    async def main() -> None:
        on_sighup(reload, "test")
        for want in (1, 2):
            os.kill(os.getpid(), signal.SIGHUP)
            for _ in range(200):
                if len(calls) >= want:
                    break
                await asyncio.sleep(0.01)
        asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)

    with caplog.at_level("INFO", logger="plait.alerting"):
        asyncio.run(main())
    assert calls == ["reload", "reload"]
    assert "test: configuration reloaded" in caplog.text
    assert "configuration reload refused, the previous one stays: route.receiver" in caplog.text


def test_a_webhook_timeout_bounds_its_attempts(tmp_path):
    """Alertmanager's webhook ``timeout`` (send_test.go TestWebhookTimeout); absent: none."""
    path = write(tmp_path, "route: {receiver: a}\nreceivers: [{name: a, webhook_configs: ["
                 "{url: 'http://127.0.0.1:9/a', timeout: 500ms}, {url: 'http://127.0.0.1:9/b'}]}]\n")
    c = load_alertmanager_config(path)
    assert (c.receiver("a").timeout, c.receiver("a.1").timeout) == (0.5, None)


def test_an_empty_inhibit_rule_loads_and_mutes_nothing(tmp_path):
    """inhibit_test.go TestEmptyInhibitionRule: an empty ``-`` item (every alert
    on both sides, so none inhibits in Alertmanager) is no rule."""
    path = write(tmp_path, BASE + "inhibit_rules:\n-\n- {}\n")
    assert load_alertmanager_config(path).inhibit_rules == []


def test_an_inhibit_rule_without_target_matchers_is_refused_naming_the_key(tmp_path):
    path = write(tmp_path, BASE + "inhibit_rules: [{source_matchers: ['a=\"1\"'], equal: [x]}]\n")
    with pytest.raises(ConfigError, match=r"^inhibit_rules.0.target_matchers: not supported"):
        load_alertmanager_config(path)


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 signed by itself, and its key (PEM files)."""
    import datetime as dt
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = tmp_path / "server.pem", tmp_path / "server.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


async def test_tls_config_ca_file_and_insecure_skip_verify_reach_an_https_receiver(tmp_path):
    """A webhook on HTTPS with a certificate of its own: refused against the
    system CAs, delivered with ``tls_config.ca_file`` (relative to the file)
    or ``insecure_skip_verify``."""
    import ssl
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from alerting.funnel import Funnel
    from alerting.intake import from_alertmanager_alert
    from alerting.webhook import WebhookSender

    cert, key = _self_signed(tmp_path)
    got: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server API
            import json

            got.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"https://127.0.0.1:{srv.server_address[1]}/hook"
    try:
        for tls, ok in (("{}", False), ("{ca_file: server.pem}", True),
                        ("{insecure_skip_verify: true}", True)):
            path = write(tmp_path, f"""
                route: {{receiver: a, group_wait: 1s}}
                receivers:
                  - {{name: a, webhook_configs: [{{url: '{url}', http_config: {{tls_config: {tls}}}}}]}}
                """)
            config = load_alertmanager_config(path)
            funnel = Funnel(config)
            funnel.ingest(from_alertmanager_alert({"labels": {"alertname": "Tls"}}, 0.0), 0.0)
            [msg] = [m for t in range(0, 3) for m in funnel.tick(float(t))]
            sender = WebhookSender(config)
            try:
                result = await sender.send(msg)
            finally:
                await sender.aclose()
            assert result.ok is ok, (tls, result)
        assert [m["alerts"][0]["labels"]["alertname"] for m in got] == ["Tls", "Tls"]
        assert got[0]["version"] == "4"
    finally:
        srv.shutdown()
        srv.server_close()


def test_a_receiver_of_several_integrations_gets_each_alert_on_every_one(tmp_path):
    """Alertmanager notifies every ``*_configs`` entry of a receiver: each
    becomes a receiver of its own (``pager``, ``pager.1``, ...) that every
    route reaching ``pager`` reaches, with its own group and message."""
    from alerting.funnel import Funnel
    from alerting.intake import from_alertmanager_alert

    path = write(tmp_path, """
        route:
          receiver: team
          group_wait: 1s
          routes: [{matchers: ['severity="critical"'], receiver: pager}]
        receivers:
          - {name: team, webhook_configs: [{url: 'http://127.0.0.1:9/team'}]}
          - name: pager
            webhook_configs: [{url: 'http://127.0.0.1:9/pager', max_alerts: 3}]
            slack_configs: [{api_url: 'http://127.0.0.1:9/slack'}]
            email_configs: [{to: oncall@example.org, from: am@example.org, smarthost: '127.0.0.1:25'}]
        """)
    c = load_alertmanager_config(path)
    assert c.fanout == {"pager": ["pager.1", "pager.2"]}
    assert [(r.name, r.type) for r in c.receivers] == [
        ("team", "webhook"), ("pager", "webhook"), ("pager.1", "slack"), ("pager.2", "email")]
    funnel = Funnel(c)
    for sev in ("critical", "info"):
        funnel.ingest(from_alertmanager_alert({"labels": {"alertname": "X", "severity": sev}}, 0.0), 0.0)
    sent = sorted((m.receiver, [a["labels"]["severity"] for a in m.alerts()])
                  for t in range(3) for m in funnel.tick(float(t)))
    assert sent == [("pager", ["critical"]), ("pager.1", ["critical"]), ("pager.2", ["critical"]),
                    ("team", ["info"])]
    more = {"receivers": {"pager": {"bucket": {"burst": 2}}}}
    c = translate(yaml.safe_load(path.read_text()), tmp_path, more)
    assert [c.receiver(n).bucket.burst for n in ("pager", "pager.1", "team")] == [2, 2, UNLIMITED["burst"]]


def test_each_integrations_copy_is_inhibited_and_released_on_its_own_receiver(tmp_path):
    """The root's receiver has two integrations and no sub-routes: a warning
    inhibited by a critical alert reaches both once the critical resolves."""
    from alerting.funnel import Funnel
    from alerting.intake import from_alertmanager_alert

    path = write(tmp_path, """
        route: {receiver: pager, group_wait: 1s, group_interval: 1s, group_by: [severity]}
        receivers:
          - name: pager
            webhook_configs: [{url: 'http://127.0.0.1:9/p'}, {url: 'http://127.0.0.1:9/p2'}]
        inhibit_rules:
          - {source_matchers: ['severity="critical"'], target_matchers: ['severity="warning"'],
             equal: [alertname]}
        """)
    funnel = Funnel(load_alertmanager_config(path))
    alert = lambda sev, now=0.0, **more: from_alertmanager_alert(  # noqa: E731
        {"labels": {"alertname": "X", "severity": sev}, **more}, now)
    funnel.ingest(alert("critical"), 0.0)
    assert [(e.raw_id.partition("~")[2], e.outcome) for e in funnel.ingest(alert("warning"), 0.5)] == [
        ("", "inhibited"), ("pager.1", "inhibited")]
    sent = []
    for t in range(12):
        if t == 5:
            funnel.ingest(alert("critical", 5.0, startsAt="1970-01-01T00:00:00Z",
                                endsAt="1970-01-01T00:00:04Z"), 5.0)
        for m in funnel.tick(float(t)):
            sent.append((m.receiver, [(a["labels"]["severity"], a["status"]) for a in m.alerts()]))
            funnel.delivered(m.id, float(t))
    for receiver in ("pager", "pager.1"):
        assert [s for r, s in sent if r == receiver] == [
            [("critical", "firing")], [("critical", "resolved")], [("warning", "firing")]]


def test_templates_and_receiver_fields_go_to_the_renderer_at_load(tmp_path):
    """With the Go-template renderer in the build (``alerting/gotemplate.py``):
    a template file or a receiver field it cannot parse refuses the file,
    naming the file and line (or the field)."""
    from alerting.amconfig import _renderer, template_set

    if _renderer() is None:
        pytest.skip("this build has no Go-template renderer (alerting/gotemplate.py)")
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "ok.tmpl").write_text('{{ define "team.title" }}[{{ .Status }}]{{ end }}\n')
    text = """
        templates: ['t/*.tmpl']
        route: {receiver: chat}
        receivers:
          - name: chat
            slack_configs: [{api_url: 'http://127.0.0.1:9/s', title: '%s'}]
        """
    path = write(tmp_path, text % '{{ template "team.title" . }}')
    templates = template_set(load_alertmanager_config(path))
    assert templates is not None
    path = write(tmp_path, text % '{{ if }}')
    with pytest.raises(ConfigError, match=r"^receivers.chat.title: "):
        load_alertmanager_config(path)
    (tmp_path / "t" / "bad.tmpl").write_text('{{ define "x" }}\n{{ .Status \n')
    path = write(tmp_path, text % "plain")
    with pytest.raises(ConfigError, match=r"^templates: .*bad.tmpl:2"):
        load_alertmanager_config(path)


@pytest.mark.parametrize("receiver,field", [
    ("pagerduty_configs: [{routing_key: '@T@'}]", "routing_key"),
    ("opsgenie_configs: [{api_key: '@T@'}]", "api_key"),
    ("email_configs: [{to: '@T@', from: a@example.org, smarthost: '127.0.0.1:25'}]", "to"),
    ("email_configs: [{to: b@example.org, smarthost: '127.0.0.1:25'}]", "from"),
])
def test_the_keys_and_addresses_alertmanager_renders_are_parsed_at_load(tmp_path, receiver,
                                                                        field):
    """Alertmanager 0.25 renders these as templates (pagerduty.go ``notifyV2``: ``tmpl(routingKey)``,
    opsgenie.go ``createRequests``: ``tmpl(apiKey)``, email.go ``Notify``: ``tmpl(n.conf.To)`` /
    ``From``); Plait parses them at load as its other template fields (``from`` from
    ``global.smtp_from`` here)."""
    from alerting.amconfig import _renderer

    if _renderer() is None:
        pytest.skip("this build has no Go-template renderer (alerting/gotemplate.py)")
    text = ("global: {smtp_from: '%s'}\nroute: {receiver: x}\nreceivers: [{name: x, %s}]\n"
            % ("@T@" if field == "from" else "c@example.org", receiver))
    good = "{{ .Receiver }}@example.org"
    config = load_alertmanager_config(write(tmp_path, text.replace("@T@", good)))
    assert config.receiver("x").alertmanager_fields[field] == good
    with pytest.raises(ConfigError, match=rf"^receivers.x.{field}: "):
        load_alertmanager_config(write(tmp_path, text.replace("@T@", "{{ if }}")))


def test_the_ehlo_name_is_the_receivers_hello_else_the_global_one_else_localhost(tmp_path):
    """config.go: an email's ``hello`` defaults to ``global.smtp_hello``, whose default is
    ``localhost`` (``DefaultGlobalConfig``); empty, Go's net/smtp says ``localhost`` too."""
    text = """
        global: {smtp_smarthost: '127.0.0.1:25', smtp_from: a@example.org%s}
        route: {receiver: own}
        receivers:
          - {name: own, email_configs: [{to: b@example.org, hello: mx.example.org}]}
          - {name: other, email_configs: [{to: b@example.org}]}
        """
    config = load_alertmanager_config(write(tmp_path, text % ", smtp_hello: am.example.org"))
    assert [config.receiver(r).email.hello for r in ("own", "other")] == [
        "mx.example.org", "am.example.org"]
    for given in ("", ", smtp_hello: ''"):
        config = load_alertmanager_config(write(tmp_path, text % given))
        assert config.receiver("other").email.hello == "localhost"


def test_an_email_whose_addresses_render_to_no_address_fails_its_attempt(tmp_path):
    """email.go ``Notify``: ``from`` must parse to exactly one address and ``to`` to a list,
    else the notification fails before any mail; Plait's attempt fails without connecting
    (port 9: nothing listens)."""
    import asyncio

    from alerting.model import Message
    from alerting.webhook import WebhookSender

    async def send(config, message):
        sender = WebhookSender(config)
        try:
            return await sender.send(message)
        finally:
            await sender.aclose()

    text = """
        route: {receiver: mail}
        receivers:
          - name: mail
            email_configs: [{to: '{{ .CommonLabels.owner }}', from: 'a@example.org, b@example.org',
                             smarthost: '127.0.0.1:9', require_tls: false}]
        """
    view = {"fingerprint": "0" * 16, "rule": "A", "asset": "", "severity": "", "status": "firing",
            "change": "new", "escalated_from": None, "labels": {"alertname": "A"},
            "annotations": {}, "starts_at": 999_000.0, "ends_at": None, "duration": None,
            "transient": False, "generator_url": "", "source": "alertmanager"}
    message = Message("m1", "mail", "idem", 1, 1_000_000.0, [{
        "group_id": "g", "group_labels": {"alertname": "A"}, "part": 1, "parts": 1,
        "merged": False, "reminder": False, "counts": {"new": 1}, "alerts": [view]}],
        alert_count=1)
    result = asyncio.run(send(load_alertmanager_config(write(tmp_path, text)), message))
    assert (result.ok, result.error) == (False, "email: must be exactly one 'from' address (got: 2)")
    text = text.replace("a@example.org, b@example.org", "a@example.org")
    result = asyncio.run(send(load_alertmanager_config(write(tmp_path, text)), message))
    assert not result.ok and result.error.startswith("email: parse 'to' addresses: mail: no address")


def test_plait_dev_refuses_a_broken_alertmanager_yml_before_starting_anything(tmp_path):
    import os
    import sys

    path = write(tmp_path, routed("{receiver: nope}"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLAIT_")}
    out = subprocess.run([sys.executable, "-m", "ops.cli", "dev", "--data-dir", str(tmp_path / "d"),
                          "--alertmanager-config", str(path)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1, out.stderr
    assert out.stderr.strip().splitlines() == [
        f'plait dev: --alertmanager-config {path}: route.routes.0.receiver: undefined receiver '
        '"nope" used in route']
    assert not (tmp_path / "d").exists()


def test_a_reload_that_removes_a_receiver_settles_its_open_groups_without_a_request():
    from alerting.amconfig import keep_removed_receivers
    from alerting.funnel import Funnel
    from alerting.intake import from_alertmanager_alert
    from alerting.receivers import build_requests

    def config(name: str):
        return translate({"route": {"receiver": name, "group_wait": "1s"},
                          "receivers": [{"name": name, "webhook_configs": [{"url": f"http://127.0.0.1:9/{name}"}]}]})

    old, new = config("x"), config("y")
    funnel = Funnel(old)
    funnel.ingest(from_alertmanager_alert({"labels": {"alertname": "A"}}, 0.0), 0.0)
    funnel.config = keep_removed_receivers(old, new)
    assert [r.name for r in funnel.config.receivers] == ["y", "x"]
    [message] = funnel.tick(2.0)
    assert message.receiver == "x" and build_requests(message, funnel.config.receiver("x")) == []
    assert keep_removed_receivers(new, new) is new


def test_an_alertmanager_yml_given_as_plaits_own_file_says_which_setting_takes_it():
    from alerting.config import load_config

    with pytest.raises(ConfigError) as err:
        load_config("route: {receiver: a}\nreceivers: [{name: a, webhook_configs: "
                    "[{url: 'http://127.0.0.1:9/a'}]}]\n")
    assert "looks like an alertmanager.yml" in str(err.value)
    assert "--alertmanager-config" in str(err.value)
    with pytest.raises(ConfigError) as err:  # Plait's own file with a mistake: no such hint
        load_config("receivers: [{name: a, url: 'http://127.0.0.1:9/a', bogus: 1}]\n")
    assert "alertmanager.yml" not in str(err.value)


@pytest.mark.parametrize("group_by, want", [
    ("['...']", {"alertname": "S9", "rule": "r1", "job": "j"}),
    ("[alertname, rule]", {"alertname": "S9", "rule": "r1"}),
    ("[job]", {"job": "j"})])
def test_an_alerts_own_rule_label_is_a_group_label_as_sent(tmp_path, group_by, want):
    # Plait spells its derived rule as alertname; a rule label the alert carries is its own
    from alerting.delivery import render_alertmanager
    from alerting.funnel import Funnel
    from alerting.intake import format_time

    path = write(tmp_path, f"route: {{receiver: a, group_by: {group_by}, group_wait: 1s}}\n"
                           "receivers: [{name: a, webhook_configs: [{url: 'http://127.0.0.1:9/a'}]}]\n")
    f = Funnel(load_alertmanager_config(path))
    f.ingest({"labels": {"alertname": "S9", "rule": "r1", "job": "j"},
              "startsAt": format_time(0)}, 0)
    [msg] = f.tick(2)
    assert render_alertmanager(msg)["groupLabels"] == want
