"""alerting/gotemplate.py against the real Alertmanager 0.25 (Debian).

Ground truth comes from Alertmanager's own code, never from expected
strings written here:

- ``amtool template render`` (amtool 0.25: Alertmanager's ``template``
  package, Go 1.19's ``text/template``) renders the same text against the
  same ``Data`` JSON (``--template.data``), with Debian's ``default.tmpl``
  and ``email.tmpl``; outputs are compared byte for byte;
- the ``prometheus-alertmanager`` daemon renders an email receiver's
  ``Subject`` and ``text`` and sends them to a local aiosmtpd server; Plait
  renders the same templates against the ``Data`` of the same alerts (the
  fingerprints and times the daemon lists) and the two must be equal.

Many templates go into one render (``@@name@@{{ template "name" . }}...``)
so each comparison costs one amtool run.
"""
from __future__ import annotations

import json
import shutil
import subprocess
from email import message_from_bytes, policy
from pathlib import Path

import httpx
import pytest
import yaml

from alerting.delivery import render_alertmanager
from alerting.goglob import glob
from alerting.gotemplate import (KV, TemplateError, alertmanager_data, data_from_json,
                                 default_template_text, load_templates)
from alerting.model import Message
from stack_env import wait_for

AMTOOL = shutil.which("amtool")
ALERTMANAGER = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
DEBIAN_TMPL = Path("/usr/share/prometheus/alertmanager")
HERE = Path(__file__).parent / "gotemplate"
CONSTRUCTS = str(HERE / "constructs.tmpl")
OVERRIDE = str(HERE / "override.tmpl")
needs_amtool = pytest.mark.skipif(AMTOOL is None or not (DEBIAN_TMPL / "default.tmpl").exists(),
                                  reason="amtool 0.25 and its templates (apt-get install "
                                  "prometheus-alertmanager; .ci/run installs it)")

#: two firing alerts and one resolved, grouped by alertname; HTML, quotes,
#: a receiver name with a regexp metacharacter (Alertmanager quotes it)
FIRING_MIX = {
    "receiver": "team-x\\.pager", "status": "firing",
    "alerts": [
        {"status": "firing",
         "labels": {"alertname": "DiskFull", "instance": "db1:9100", "severity": "critical",
                    "team": "x"},
         "annotations": {"summary": "Disk 95% full",
                         "description": 'db1 /var is <full> & "growing"'},
         "startsAt": "2024-03-05T10:11:12.5Z", "endsAt": "0001-01-01T00:00:00Z",
         "generatorURL": "http://prom:9090/graph?g0.expr=x", "fingerprint": "1a2b3c4d5e6f7a8b"},
        {"status": "firing",
         "labels": {"alertname": "DiskFull", "instance": "db2:9100", "severity": "critical",
                    "team": "x"},
         "annotations": {"summary": "Disk 97% full"},
         "startsAt": "2024-03-05T10:12:00Z", "endsAt": "0001-01-01T00:00:00Z",
         "generatorURL": "http://prom:9090/graph?g0.expr=y", "fingerprint": "2a2b3c4d5e6f7a8b"},
        {"status": "resolved",
         "labels": {"alertname": "DiskFull", "instance": "db3:9100", "severity": "warning",
                    "team": "x"},
         "annotations": {"summary": "Disk ok"},
         "startsAt": "2024-03-05T09:00:00Z", "endsAt": "2024-03-05T10:00:00Z",
         "generatorURL": "", "fingerprint": "3a2b3c4d5e6f7a8b"},
    ],
    "groupLabels": {"alertname": "DiskFull"},
    "commonLabels": {"alertname": "DiskFull", "team": "x"},
    "commonAnnotations": {},
    "externalURL": "http://am.example:9093",
}

#: every alert resolved, no group labels, a common annotation
ALL_RESOLVED = {
    "receiver": "ops", "status": "resolved",
    "alerts": [
        {"status": "resolved", "labels": {"alertname": "A", "job": "api", "zone": "eu-1"},
         "annotations": {"runbook": "http://rb/a"}, "startsAt": "2024-01-01T00:00:00Z",
         "endsAt": "2024-01-01T01:30:00.25Z", "generatorURL": "http://prom/a",
         "fingerprint": "00000000000000aa"},
        {"status": "resolved", "labels": {"alertname": "B", "job": "api"},
         "annotations": {"runbook": "http://rb/a", "summary": "b"},
         "startsAt": "2024-01-01T00:05:00Z", "endsAt": "2024-01-01T01:00:00Z",
         "generatorURL": "", "fingerprint": "00000000000000bb"},
    ],
    "groupLabels": {}, "commonLabels": {"job": "api"},
    "commonAnnotations": {"runbook": "http://rb/a"}, "externalURL": "https://am.example/sub",
}

#: what default.tmpl defines for a list of alerts (dot), not for Data
LIST_TEMPLATES = {"__text_alert_list", "pagerduty.default.instances"}


def amtool_render(tmp_path: Path, text: str, doc: dict, globs: list[str]) -> str:
    data = tmp_path / "data.json"
    data.write_text(json.dumps(doc))
    cmd = [AMTOOL, "template", "render", f"--template.text={text}", f"--template.data={data}",
           f"--template.glob={DEBIAN_TMPL / 'default.tmpl'}",
           f"--template.glob={DEBIAN_TMPL / 'email.tmpl'}"]
    cmd += [f"--template.glob={g}" for g in globs]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def joined(names: list[str]) -> str:
    """One template text rendering each of ``names`` after a ``@@name@@`` marker."""
    return "".join(f'@@{n}@@{{{{ template "{n}" . }}}}' for n in names)


def split(rendered: str, names: list[str]) -> dict[str, str]:
    parts = rendered.split("@@")[1:]
    got = dict(zip(parts[0::2], parts[1::2]))
    assert list(got) == names
    return got


def template_names(ts) -> list[str]:
    return [n for n in ts.names() if not n.endswith(".tmpl") and n not in LIST_TEMPLATES]


@needs_amtool
@pytest.mark.parametrize("doc", [FIRING_MIX, ALL_RESOLVED], ids=["firing-mix", "all-resolved"])
def test_default_templates_render_as_alertmanager_025(tmp_path, doc):
    ts = load_templates([])
    names = template_names(ts)
    # every notifier's defaults of 0.25 (msteams' came with 0.26)
    for n in ("__subject", "email.default.subject", "email.default.html", "slack.default.title",
              "slack.default.text", "pagerduty.default.description", "opsgenie.default.message",
              "opsgenie.default.description", "wechat.default.message", "telegram.default.message",
              "webex.default.message", "discord.default.title", "sns.default.message",
              "victorops.default.state_message", "pushover.default.message"):
        assert n in names
    assert "msteams.default.title" not in names
    text = joined(names)
    want = split(amtool_render(tmp_path, text, doc, []), names)
    got = split(ts.render(text, data_from_json(doc)), names)
    for n in names:
        assert got[n] == want[n], n
    assert want["__subject"].startswith("[FIRING:2] DiskFull" if doc is FIRING_MIX else "[RESOLVED]")


@needs_amtool
def test_templates_for_alert_lists_render_as_alertmanager_025(tmp_path):
    # __text_alert_list and pagerduty.default.instances take a list of alerts
    ts = load_templates([])
    text = ('@@{{ template "__text_alert_list" .Alerts.Firing }}'
            '@@{{ template "pagerduty.default.instances" .Alerts }}@@')
    assert ts.render(text, data_from_json(FIRING_MIX)) == amtool_render(tmp_path, text,
                                                                        FIRING_MIX, [])


@needs_amtool
@pytest.mark.parametrize("doc", [FIRING_MIX, ALL_RESOLVED], ids=["firing-mix", "all-resolved"])
def test_each_construct_renders_as_alertmanager_025(tmp_path, doc):
    # constructs.tmpl uses every supported construct and function once at
    # least; override.tmpl, loaded after it, replaces a block's body
    globs = [CONSTRUCTS, OVERRIDE]
    ts = load_templates(globs)
    names = [n for n in ts.names() if n.startswith("t.")]
    assert len(names) >= 8
    text = joined(names)
    want = split(amtool_render(tmp_path, text, doc, globs), names)
    got = split(ts.render(text, data_from_json(doc)), names)
    for n in names:
        assert got[n] == want[n], n
    assert got["t.block"].startswith("overridden ")


#: operands, one-operand and two-operand functions of the random pipelines
#: (no alert structs: a time under printf "%d" prints Go's internal fields, not
#: rendered here; docs/alerting.md, "Differences from Alertmanager")
OPERANDS = [".Status", ".Receiver", ".CommonLabels", '"str"', "(len .Alerts)",
            '"Hé llo-wOrld_x.y"', "3", "1.5", "true", ".CommonLabels.team", ".ExternalURL",
            ".GroupLabels.SortedPairs.Values", "(index .Alerts 0).Labels", '""', "0", "nil",
            ".CommonAnnotations", "(index .Alerts 0).Annotations.description", "(len .Alerts.Firing)",
            '(stringSlice "a" "b")', ".CommonLabels.nope", "-2", "'x'", "`r\\n`"]
UNARY = ["toUpper", "toLower", "title", "len", "print", "println", 'printf "%v"',
         'printf "%s"', 'printf "%q"', 'printf "%d"', 'printf "%5.2f"', 'printf "%x"', "html",
         "js", "urlquery", "not", "safeHtml", 'join ","', "print 1", 'printf "%v-%v" 7']
BINARY = ["eq", "ne", "lt", "le", "gt", "ge", "and", "or", "print", "index", "match", "slice"]
CONTAINERS = [".Alerts", ".Alerts.Firing", ".Alerts.Resolved", ".CommonLabels", '""', "0",
              ".GroupLabels.SortedPairs", ".CommonAnnotations", "(stringSlice)", ".Status", "1"]
BODIES = ["{{ . }}", "{{ .Name }}", "x", "{{ $ | len }}", '{{- " t " -}}', "{{ len . }}",
          '{{ printf "%v|" . }}', "\n  ", "{{ $.Status }}", "{{ if $ }}y{{ end }}", "{{/* c */}}"]


def random_pipeline(rng, depth: int = 0) -> str:
    r = rng.random()
    if depth > 2 or r < 0.35:
        return rng.choice(OPERANDS)
    if r < 0.7:
        return f"({rng.choice(UNARY)} {random_pipeline(rng, depth + 1)})"
    return (f"({rng.choice(BINARY)} {random_pipeline(rng, depth + 1)} "
            f"{random_pipeline(rng, depth + 1)})")


def random_block(rng, depth: int = 0) -> str:
    r = rng.random()
    if depth > 2 or r < 0.3:
        return rng.choice(BODIES)
    kind, c = rng.choice(["if", "with", "range", "range2", "seq"]), rng.choice(CONTAINERS)
    inner = random_block(rng, depth + 1)
    if kind == "seq":
        return inner + random_block(rng, depth + 1)
    orelse = "{{ else }}" + random_block(rng, depth + 1) if rng.random() < 0.5 else ""
    if kind == "range2":
        return f"{{{{ range $i, $v := {c} }}}}{{{{ $i }}}}={{{{ $v }}}}{inner}{orelse}{{{{ end }}}}"
    if kind == "if" and rng.random() < 0.3:
        orelse = f"{{{{ else if {rng.choice(CONTAINERS)} }}}}{inner}" + orelse
    return f"{{{{- {kind} {c} }}}}{inner}{orelse}{{{{ end -}}}}"


@needs_amtool
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_templates_render_as_alertmanager_025(tmp_path, seed):
    # random pipelines and control structures; those Plait renders without
    # an error go to amtool in one text, which must render them all alike
    import random

    rng = random.Random(seed)
    ts, data = load_templates([]), data_from_json(FIRING_MIX)
    texts = ["{{ " + random_pipeline(rng) + " }}" for _ in range(150)]
    texts += [random_block(rng) for _ in range(100)]
    kept = []
    for t in texts:
        try:
            ts.render(t, data)
        except TemplateError:
            continue
        kept.append(t)
    assert len(kept) > 120
    names = [str(i) for i in range(len(kept))]
    text = "".join(f"@@{i}@@{t}" for i, t in enumerate(kept))
    want = split(amtool_render(tmp_path, text, FIRING_MIX, []), names)
    got = split(ts.render(text, data), names)
    for i, t in enumerate(kept):
        assert got[str(i)] == want[str(i)], t


#: fragments of template syntax, glued at random into mostly broken texts
FRAGMENTS = ["{{", "}}", "{{-", "-}}", " ", "{{- ", " -}}", "/*", "*/", '"', "'", "`", "\\",
             "$", "$x", ":=", "=", "|", "(", ")", ",", ".", ".A", "if", "else", "end", "range",
             "with", "define", "template", "block", "break", "continue", "nil", "true", "1",
             "-", "0x", "1e", ".5", "x", "\n", "printf", '"%', "len", "index", ".Alerts", "é",
             "}", "{", '"a"', "'a'", "\\x", "\\u12", ".Status", "and", "or", "eq", "slice",
             "_", "{{ ", " }}", "{{ .Status }}", "{{ end }}", "{{ if .Status }}",
             "{{ range .Alerts }}", "{{ $x := 1 }}"]


def token_soup(rng, most: int) -> str:
    return "".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(1, most)))


def test_any_text_renders_or_raises_template_error():
    # a broken receiver field is the user's error, named, never a crash
    import random

    rng = random.Random(7)
    ts, data = load_templates([]), data_from_json(FIRING_MIX)
    rendered = 0
    for _ in range(3000):
        try:
            ts.render(token_soup(rng, 25), data)
            rendered += 1
        except TemplateError as e:
            assert e.file == "<text>" and e.line >= 1 and str(e).startswith("<text>:")
    assert 300 < rendered < 2700


@needs_amtool
def test_broken_texts_are_refused_as_alertmanager_refuses_them(tmp_path):
    # Plait refuses exactly the texts amtool refuses and renders the others alike
    import random

    rng = random.Random(11)
    ts, data = load_templates([]), data_from_json(FIRING_MIX)
    (tmp_path / "data.json").write_text(json.dumps(FIRING_MIX))
    for _ in range(60):
        text = token_soup(rng, 12)
        am = subprocess.run([AMTOOL, "template", "render", f"--template.text={text}",
                             f"--template.data={tmp_path / 'data.json'}",
                             f"--template.glob={DEBIAN_TMPL / 'default.tmpl'}"],
                            capture_output=True, text=True, timeout=60)
        try:
            got = ts.render(text, data)
        except TemplateError as e:
            assert am.returncode != 0, (text, str(e))
            continue
        assert am.returncode == 0 and am.stdout == got, (text, am.stderr)


def test_glob_patterns_load_in_sorted_order_and_later_files_win(tmp_path):
    (tmp_path / "b.tmpl").write_text('{{ define "x" }}from b{{ end }}')
    (tmp_path / "a.tmpl").write_text('{{ define "x" }}from a{{ end }}{{ define "y" }}y{{ end }}')
    (tmp_path / "c.tmpl").write_text('{{ define "x" }}{{ end }}')  # empty: never replaces
    ts = load_templates([*glob(str(tmp_path / "*.tmpl")), *glob(str(tmp_path / "none-*.tmpl"))])
    assert ts.render_named("x", {}) == "from b" and ts.render_named("y", {}) == "y"
    # a user file replaces a default template
    (tmp_path / "d.tmpl").write_text('{{ define "__subject" }}mine{{ end }}')
    ts = load_templates([str(tmp_path / "d.tmpl")])
    assert ts.render('{{ template "slack.default.title" . }}', data_from_json(FIRING_MIX)) == "mine"


def test_go_semantics_on_plain_maps():
    ts = load_templates([])
    # a plain map's missing key prints <no value>; a KV's (a label set) ""
    assert ts.render("{{ .x }}|{{ .kv.x }}|{{ index .kv `x` }}", {"kv": KV()}) == "<no value>||"
    assert ts.render("{{ and .a .b }}|{{ or .a .b }}|{{ or .c .a }}",
                     {"a": 0, "b": "bee", "c": [1]}) == "0|bee|[1]"
    assert ts.render("{{ range $k, $v := . }}{{ $k }}={{ $v }},{{ end }}",
                     {"b": 2, "a": 1.5, "c": True}) == "a=1.5,b=2,c=true,"
    assert ts.render("", {}) == ""


# -- the data model ----------------------------------------------------------------------

def _view(fp: str, instance: str, status: str, starts: float, ends: float | None) -> dict:
    return {"fingerprint": fp, "rule": "ExportFailed", "asset": f"BILL/{instance}",
            "severity": "critical", "status": status, "change": "new", "escalated_from": None,
            "labels": {"instance": instance, "team": "billing"},
            "annotations": {"summary": f"{instance} failed", "runbook_url": "http://rb"},
            "starts_at": starts, "ends_at": ends, "duration": None, "transient": False,
            "generator_url": "http://prom/g", "source": "native"}


def _sections() -> list[dict]:
    alerts = [_view("aaaaaaaaaaaaaaaa", "n1", "firing", 1_700_000_000.0, None),
              _view("bbbbbbbbbbbbbbbb~r2", "n2", "resolved", 1_699_999_000.25, 1_700_000_100.0)]
    return [{"group_id": "g1", "group_labels": {"rule": "ExportFailed", "team": "billing"},
             "part": 1, "parts": 1, "merged": False, "reminder": False,
             "counts": {"new": 1, "escalated": 0, "resolved": 1, "still_firing": 1},
             "alerts": alerts}]


def test_alertmanager_data_from_sections():
    data = alertmanager_data(_sections(), "billing.oncall", "https://plait.example")
    assert isinstance(data, dict)
    assert data["Receiver"] == "billing\\.oncall"  # regexp.QuoteMeta, as Alertmanager
    assert data["Status"] == "firing"
    assert [a["Status"] for a in data["Alerts"].Firing()] == ["firing"]
    assert [a["Fingerprint"] for a in data["Alerts"].Resolved()] == ["bbbbbbbbbbbbbbbb"]
    assert data["GroupLabels"] == {"alertname": "ExportFailed", "team": "billing"}
    # Plait's rule is the alertname; severity and asset are labels, as in its webhook body
    assert data["CommonLabels"].Names() == ["alertname", "severity", "team"]
    assert data["CommonAnnotations"] == {"runbook_url": "http://rb"}
    assert data["CommonLabels"].Remove(["team"]).Values() == ["ExportFailed", "critical"]
    ts = load_templates([])
    assert ts.render("{{ (index .Alerts 0).EndsAt.IsZero }} {{ (index .Alerts 1).EndsAt.Unix }}",
                     data) == "true 1700000100"


@needs_amtool
def test_alertmanager_data_renders_as_amtool_renders_the_webhook_body(tmp_path):
    # Plait's Alertmanager webhook body is Alertmanager's Data in JSON: amtool
    # rendering that body and Plait rendering alertmanager_data of the same
    # sections must agree on every default template and every construct
    message = Message("m1", "billing", "k", 1, 1_700_000_200.0, _sections(), alert_count=2)
    body = render_alertmanager(message, "https://plait.example")
    ts = load_templates([CONSTRUCTS])
    names = template_names(ts)
    text = joined(names)
    want = split(amtool_render(tmp_path, text, body, [CONSTRUCTS]), names)
    got = split(ts.render(text, alertmanager_data(_sections(), "billing", "https://plait.example")),
                names)
    for n in names:
        assert got[n] == want[n], n


# -- the real Alertmanager daemon ------------------------------------------------------

class _Inbox:
    def __init__(self) -> None:
        self.mails: list[bytes] = []

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's name
        self.mails.append(envelope.content)
        return "250 OK"


def _whole_group(mails: list[bytes], alerts: list[dict]):
    """The first of ``mails`` whose text names the instance of every one of ``alerts``
    (the body prints the whole ``Data``), parsed; None before it arrives. A mail with no
    text/plain part is not it (one such mail was received once, in a loaded suite run)."""
    for raw in mails:
        mail = message_from_bytes(raw, policy=policy.default)
        body = mail.get_body(("plain",))
        if body is not None and all(a["labels"]["instance"] in body.get_content()
                                    for a in alerts):
            return mail
    return None


def _start_alertmanager(tmp_path: Path, smtp_port: int, names: list[str]):
    from ops.infra import free_port

    # group_interval 1s: the daemon flushes a group whose alerts started more than
    # group_wait ago at once, possibly before it has inserted the POST's last alert;
    # the next flush, a second later, holds them all
    cfg = {"global": {"smtp_require_tls": False},
           "route": {"receiver": "mail", "group_by": ["alertname"], "group_wait": "1s",
                     "group_interval": "1s", "repeat_interval": "1h"},
           "receivers": [{"name": "mail", "email_configs": [{
               "to": "oncall@example.com", "from": "am@example.com",
               "smarthost": f"127.0.0.1:{smtp_port}", "require_tls": False,
               "send_resolved": True, "headers": {"Subject": '{{ template "__subject" . }}'},
               "html": "", "text": joined(names) + "@@dot@@{{ . }}"}]}],
           "templates": [CONSTRUCTS]}
    (tmp_path / "am.yml").write_text(yaml.safe_dump(cfg))
    port = free_port()
    proc = subprocess.Popen(
        [ALERTMANAGER, f"--config.file={tmp_path / 'am.yml'}", f"--storage.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=",
         "--web.external-url=http://am.example:9093"],
        stdout=open(tmp_path / "am.log", "wb"), stderr=subprocess.STDOUT)
    return proc, f"http://127.0.0.1:{port}"


def fingerprint(labels: dict[str, str]) -> str:
    """Alertmanager's alert fingerprint (prometheus/common ``LabelSet.Fingerprint``:
    FNV-1a 64 over the sorted names and values, each followed by 0xff)."""
    h = 14695981039346656037
    for name in sorted(labels):
        for part in (name, labels[name]):
            for b in part.encode() + b"\xff":
                h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/-/ready", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.mark.skipif(ALERTMANAGER is None, reason="the Alertmanager binary is absent "
                    "(apt-get install prometheus-alertmanager; .ci/run installs it)")
def test_real_alertmanager_email_matches_plait_rendering(tmp_path):
    from aiosmtpd.controller import Controller
    from ops.infra import free_port

    ts = load_templates([CONSTRUCTS])
    names = template_names(ts)
    inbox, smtp_port = _Inbox(), free_port()
    ctl = Controller(inbox, hostname="127.0.0.1", port=smtp_port)
    ctl.start()
    proc, url = _start_alertmanager(tmp_path, smtp_port, names)
    try:
        wait_for(lambda: _ready(url) or proc.poll() is not None, 30, "Alertmanager ready")
        assert proc.poll() is None, (tmp_path / "am.log").read_text()
        # the alerts of FIRING_MIX, posted as Prometheus posts them
        posted = [{"labels": a["labels"], "annotations": a["annotations"],
                   "startsAt": a["startsAt"], "generatorURL": a["generatorURL"],
                   "endsAt": a["endsAt"] if a["status"] == "resolved" else "2099-01-01T00:00:00Z"}
                  for a in FIRING_MIX["alerts"]]
        resp = httpx.post(f"{url}/api/v2/alerts", json=posted, timeout=10)
        assert resp.status_code == 200, resp.text
        mail = wait_for(lambda: _whole_group(inbox.mails, FIRING_MIX["alerts"]), 30,
                        "Alertmanager's email holding every alert posted")
        listed = httpx.get(f"{url}/api/v2/alerts", timeout=10).json()
    finally:
        proc.kill()
        proc.wait(10)
        ctl.stop()
    # the same Data: the daemon's fingerprints (it lists the active ones);
    # a firing alert's EndsAt is Go's zero time there too
    for a in listed:
        assert a["fingerprint"] == fingerprint(a["labels"])
    doc = json.loads(json.dumps(FIRING_MIX))
    doc["receiver"] = "mail"
    for a in doc["alerts"]:
        a["fingerprint"] = fingerprint(a["labels"])
    data = data_from_json(doc)
    assert mail["Subject"] == ts.render('{{ template "__subject" . }}', data)
    # SMTP carries lines ending CRLF (RFC 5321): the one difference allowed
    want = split(mail.get_body(("plain",)).get_content().replace("\r\n", "\n"), names + ["dot"])
    got = split(ts.render(joined(names) + "@@dot@@{{ . }}", data), names + ["dot"])
    # text/template prints the *template.Data the daemon passes without its &
    assert got["dot"].startswith("{mail firing [{firing map[alertname:DiskFull")
    for n in names + ["dot"]:
        assert got[n] == want[n], n


# -- refused templates ---------------------------------------------------------------------

@pytest.mark.parametrize("line,construct,text", [
    (2, "humanize", '{{ define "a" }}\n{{ .Value | humanize }}{{ end }}'),
    (1, "date", '{{ date "2006" .StartsAt }}'),
    (3, "call", '\n\n{{ call .F }}'),
    (1, "{{else with}}", "{{ with .A }}{{ else with .B }}{{ end }}"),
    (1, "{{else if}}", "{{ range .A }}{{ else if .B }}{{ end }}"),
    (2, "1i", "x\n{{ 1i }}"),
    (1, "nosuchfunc", "{{ nosuchfunc 1 }}"),
])
def test_unsupported_construct_names_file_line_and_construct(tmp_path, line, construct, text):
    path = tmp_path / "team.tmpl"
    path.write_text(text)
    with pytest.raises(TemplateError) as e:
        load_templates(glob(str(tmp_path / "*.tmpl")))
    err = e.value
    assert (err.file, err.line, err.construct) == (str(path), line, construct)
    assert str(err).startswith(f"{path}:{line}: ") and f"`{construct}`" in str(err)


@pytest.mark.parametrize("line,fragment,text", [
    (1, "unclosed action", "{{ .A "),
    (2, "unexpected {{end}}", "ok\n{{ end }}"),
    (1, "undefined variable '$x'", "{{ $x }}"),
    (2, "has no {{end}}", "x\n{{ if .A }}y"),
    (1, "inside another action", '{{ if .A }}{{ define "x" }}{{ end }}{{ end }}'),
    (1, "multiple definition", '{{ define "x" }}1{{ end }}{{ define "x" }}2{{ end }}'),
    (3, "unterminated quoted string", '\n\n{{ "abc }}'),
    (1, "missing value for command", "{{ }}"),
])
def test_parse_errors_name_file_and_line(tmp_path, line, fragment, text):
    path = tmp_path / "bad.tmpl"
    path.write_text(text)
    with pytest.raises(TemplateError) as e:
        load_templates([str(path)])
    assert e.value.file == str(path) and e.value.line == line
    assert str(e.value).startswith(f"{path}:{line}: ") and fragment in str(e.value)


def test_execution_errors_name_the_construct():
    ts = load_templates([CONSTRUCTS])
    data = data_from_json(FIRING_MIX)
    with pytest.raises(TemplateError, match=r"receiver\.title:1: executing at <\{\{\.Nope\}\}>: "
                       r"can't evaluate field Nope in type template\.Data"):
        ts.render("{{ .Nope }}", data, source="receiver.title")
    with pytest.raises(TemplateError) as e:  # a receiver field checked when the config loads
        ts.check("ok\n{{ .A | humanize }}", source="receivers[0].slack_configs[0].title")
    assert (e.value.file, e.value.line, e.value.construct) == (
        "receivers[0].slack_configs[0].title", 2, "humanize")
    ts.check('{{ template "slack.default.title" . }}')
    with pytest.raises(TemplateError, match='template "missing" not defined'):
        ts.render('{{ template "missing" . }}', data)
    with pytest.raises(TemplateError, match="error calling reReplaceAll: error parsing regexp"):
        ts.render('{{ reReplaceAll "(" "" "x" }}', data)
    with pytest.raises(TemplateError, match="incompatible types for comparison"):
        ts.render('{{ eq 1 "1" }}', data)
    with pytest.raises(TemplateError, match="exceeded maximum template depth"):
        load_templates([]).render('{{ define "r" }}{{ template "r" . }}{{ end }}'
                                  '{{ template "r" . }}', data)


def test_packaged_templates_are_alertmanager_025s():
    # the files shipped are Debian's 0.25 files below the attribution header
    for name in ("default.tmpl", "email.tmpl"):
        text = default_template_text(name)
        assert "Apache" in text.split("*/", 1)[0]
        if (DEBIAN_TMPL / name).exists():
            assert text.split("*/ -}}\n", 1)[1] == (DEBIAN_TMPL / name).read_text()
    pyproject = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    assert '"templates_am/*.tmpl"' in pyproject
