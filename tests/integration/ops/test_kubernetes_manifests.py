"""The Kubernetes manifests (ops/deploy/kubernetes) hold together (issue 15, point 5).

No cluster runs here, so what `kubectl apply` would catch, and what it would not, is
checked from the files: each document against the Kubernetes API's own schemas
(kubernetes-validate, offline), the container's arguments through `kcoord serve`'s own
parser (after the entrypoint script has really run, with the ConfigMap's lines), every
setting name against kcoord's, every port, selector, mount and probe against what it
refers to. The probe script runs against a real `kcoord serve`.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from support.metrics import kcoord_with_metrics

REPO = Path(__file__).resolve().parents[3]
K8S = REPO / "ops" / "deploy" / "kubernetes"
PROBE = REPO / "ops" / "deploy" / "probe.py"
KUBERNETES_VERSION = "1.30.0"   # the oldest release the manifests promise to fit (docs/user/deploy-kubernetes.md)


def documents() -> list[tuple[str, dict]]:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    out = []
    for name in kustomization["resources"]:
        out += [(name, d) for d in yaml.safe_load_all((K8S / name).read_text()) if d is not None]
    return out


def one(kind: str, name: str | None = None) -> dict:
    found = [d for _, d in documents() if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def container() -> dict:
    (c,) = one("StatefulSet")["spec"]["template"]["spec"]["containers"]
    return c


def settings_lines() -> list[str]:
    data = one("ConfigMap")["data"]["settings.properties"]
    return [line for line in data.splitlines() if line.strip() and not line.startswith("#")]


def flag(args: list[str], name: str) -> str:
    assert args.count(name) == 1, f"{name} appears {args.count(name)} times in the container args"
    return args[args.index(name) + 1]


def env_expand(value: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion of command/args; an unknown $(VAR) stays as written,
    which the checks below would then catch."""
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m[1], m[0]), value)


def test_every_file_is_listed_and_every_document_is_named():
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    on_disk = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == on_disk, "kustomization.yaml and the directory disagree"
    for name, doc in documents():
        for key in ("apiVersion", "kind", "metadata"):
            assert key in doc, f"{name}: a document has no {key}"
        assert doc["metadata"].get("name"), f"{name}: a {doc['kind']} has no metadata.name"


def test_built_in_kinds_fit_the_kubernetes_schemas():
    import kubernetes_validate

    checked = 0
    for name, doc in documents():
        if doc["apiVersion"].startswith("monitoring.coreos.com/"):
            continue        # a CRD: its fields are checked by hand below
        try:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as e:
            pytest.fail(f"{name} {doc['kind']}/{doc['metadata']['name']}: {e.message} at {list(e.path)}")
        checked += 1
    assert checked >= 5


def test_the_entrypoint_turns_settings_into_config_flags_that_kcoord_serve_accepts(tmp_path):
    """Run the container's /bin/sh script for real, with a stand-in `kcoord` that prints
    its arguments, then parse them with kcoord's own argument parser."""
    from coordinator.cli import build_parser

    c = container()
    script = c["command"][2]
    assert c["command"][:2] == ["/bin/sh", "-c"] and c["command"][3] == "kcoord"   # $0, then args as "$@"
    mount = next(m for m in c["volumeMounts"] if m["name"] == "settings")
    assert f"< {mount['mountPath']}/settings.properties" in script, "the script reads another file than the ConfigMap's"
    (tmp_path / "settings.properties").write_text(one("ConfigMap")["data"]["settings.properties"])
    (tmp_path / "kcoord").write_text('#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done\n')
    (tmp_path / "kcoord").chmod(0o755)
    env = {"POD_NAME": "kcoord-1", "POD_NAMESPACE": "prod"}
    args = [env_expand(a, env) for a in c["args"]]
    run = subprocess.run(["/bin/sh", "-c", script.replace(mount["mountPath"], str(tmp_path)), "kcoord", *args],
                         capture_output=True, text=True, timeout=30,
                         env={"PATH": f"{tmp_path}:{os.environ['PATH']}"})
    assert run.returncode == 0, run.stderr
    argv = run.stdout.splitlines()
    expected_settings = [x for line in settings_lines() for x in ("--config", line)]
    assert argv == args + expected_settings
    try:
        parsed = build_parser().parse_args(argv)
    except SystemExit:
        pytest.fail(f"kcoord serve refuses the container's arguments {argv} (see stderr above)")
    assert parsed.command == "serve" and parsed.config == settings_lines()


def test_every_setting_is_one_kcoord_knows():
    from coordinator.cli import _configs_from_args, build_parser
    from coordinator.security.settings import is_security_setting
    from coordinator.security.upstream import UpstreamSecurity

    security = {}
    for line in settings_lines():
        name, sep, value = line.partition("=")
        assert sep, f"settings line {line!r} is not NAME=VALUE"
        if is_security_setting(name):
            security[name] = value
        else:   # kcoord's own parser: an unknown name exits naming it
            _configs_from_args(build_parser().parse_args(["serve", "--config", line]))
    # The password is a file in the pod; here any value stands for it.
    resolved = {k.removesuffix(".file"): ("x" if k.endswith(".file") else v) for k, v in security.items()}
    UpstreamSecurity.from_settings(resolved)   # SecurityConfigError names a setting it refuses


def test_identity_dns_and_secret_line_up():
    sts = one("StatefulSet")
    headless = one("Service", sts["spec"]["serviceName"])
    assert headless["spec"]["clusterIP"] == "None", "serviceName must be the headless service (per-pod DNS)"
    c = container()
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in c["env"] if "valueFrom" in e}
    assert env["POD_NAME"] == "metadata.name" and env["POD_NAMESPACE"] == "metadata.namespace"
    assert flag(c["args"], "--instance-id") == "$(POD_NAME)"
    assert flag(c["args"], "--advertised-host") == \
        f"$(POD_NAME).{headless['metadata']['name']}.$(POD_NAMESPACE).svc.cluster.local"
    # The password file setting points into the Secret's mount, at the item the Secret provides.
    password = dict(line.split("=", 1) for line in settings_lines())["upstream.sasl.password.file"]
    volumes = {v["name"]: v for v in sts["spec"]["template"]["spec"]["volumes"]}
    mounts = [m for m in c["volumeMounts"] if "secret" in volumes[m["name"]]]
    assert len(mounts) == 1
    secret = volumes[mounts[0]["name"]]["secret"]
    assert password in {f"{mounts[0]['mountPath']}/{item['path']}" for item in secret["items"]}
    for m in c["volumeMounts"]:
        assert m["name"] in volumes, f"mount of undefined volume {m['name']}"


def test_ports_probes_and_service_monitor_agree():
    c = container()
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    listen = flag(c["args"], "--listen")
    assert int(listen.rsplit(":", 1)[1]) == ports["kafka"] and listen.startswith("0.0.0.0:")
    # The broker listeners take P+1, P+2, ... (coordinator/gateway/listeners.py).
    brokers = sorted(v for k, v in ports.items() if k.startswith("broker-"))
    assert brokers == list(range(ports["kafka"] + 1, ports["kafka"] + 1 + len(brokers))) and brokers
    assert int(flag(c["args"], "--metrics-port")) == ports["metrics"]
    assert flag(c["args"], "--metrics-host") == "0.0.0.0", "a metrics server on 127.0.0.1 cannot be scraped"
    for _, doc in documents():
        if doc["kind"] == "Service":
            for p in doc["spec"]["ports"]:
                target = p["targetPort"]
                assert target in ports or target in ports.values(), \
                    f"Service {doc['metadata']['name']} targets port {target}, not a container port"
                assert ports.get(target, target) == p["port"], f"Service {doc['metadata']['name']} maps {p}"
    for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
        command = c[kind]["exec"]["command"]
        assert command[1] == "/opt/kcoord/ops/deploy/probe.py", kind
        assert int(command[command.index("--port") + 1]) == ports["kafka"], kind
        if "--metrics-port" in command:
            assert int(command[command.index("--metrics-port") + 1]) == ports["metrics"], kind
    assert "--metrics-port" in c["readinessProbe"]["exec"]["command"]
    # The image has the probe where the probes run it (Dockerfile: WORKDIR /opt/kcoord, COPY ops).
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "WORKDIR /opt/kcoord" in dockerfile and "COPY ops ./ops" in dockerfile and PROBE.exists()
    monitor = one("ServiceMonitor")
    selected = [d for _, d in documents() if d["kind"] == "Service"
                and monitor["spec"]["selector"]["matchLabels"].items() <= d["metadata"]["labels"].items()]
    assert [d["metadata"]["name"] for d in selected] == ["kcoord-headless"], "scrape each pod once"
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in selected[0]["spec"]["ports"]}
    assert ports[next(p["targetPort"] for p in selected[0]["spec"]["ports"] if p["name"] == endpoint["port"])] \
        == ports["metrics"]


def test_selectors_match_the_pods_and_shutdown_has_time():
    from coordinator.cli import SHUTDOWN_STEP_TIMEOUT

    sts = one("StatefulSet")
    labels = sts["spec"]["template"]["metadata"]["labels"]
    assert sts["spec"]["selector"]["matchLabels"].items() <= labels.items()
    for _, doc in documents():
        if doc["kind"] == "Service":
            assert doc["spec"]["selector"].items() <= labels.items(), doc["metadata"]["name"]
    pdb = one("PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pdb["spec"]["maxUnavailable"] == 1 and sts["spec"]["replicas"] == 3
    pod = sts["spec"]["template"]["spec"]
    (term,) = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"].items() <= labels.items()
    # coordinator/cli.py _shutdown: the cluster leave (2 steps' time), then the gateway, the
    # state-topic client, the fenced state log and the authorizer, each bounded by the step.
    assert pod["terminationGracePeriodSeconds"] >= 6 * SHUTDOWN_STEP_TIMEOUT + 10
    assert container()["resources"]["requests"]["cpu"] and container()["resources"]["requests"]["memory"]


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_the_probe_script_against_a_real_kcoord(tansu):
    kc = kcoord_with_metrics(tansu.bootstrap, f"__kcoord_probe_{uuid.uuid4().hex[:6]}", state_partitions=2).start()

    def probe(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(PROBE), *args], capture_output=True, text=True, timeout=30)

    try:
        live = probe("live", "--port", str(kc.port))
        assert live.returncode == 0, live.stdout
        ready = probe("ready", "--port", str(kc.port), "--metrics-port", str(kc.metrics_port))
        assert ready.returncode == 0, ready.stdout
        assert kc.metrics()["kcoord_serving"] == 1      # a single process always may answer
        # Something that is not kcoord's Kafka listener: the metrics HTTP server answers
        # garbage to ApiVersions; the probe fails saying where, within its timeout.
        wrong = probe("live", "--port", str(kc.metrics_port), "--timeout", "2")
        assert wrong.returncode == 1 and f"127.0.0.1:{kc.metrics_port}" in wrong.stdout
    finally:
        kc.stop()
    gone = probe("live", "--port", str(kc.port), "--timeout", "2")
    assert gone.returncode == 1 and "ApiVersions on" in gone.stdout


def test_ready_counts_loading_and_failed_partitions_and_the_lease():
    sys.path.insert(0, str(PROBE.parent))
    try:
        from probe import serving, unready_partitions
    finally:
        sys.path.remove(str(PROBE.parent))
    assert serving("kcoord_serving 1.0\n") and not serving("kcoord_serving 0.0\n")
    assert serving("kcoord_upstream_up 1.0\n")      # an older kcoord without the gauge
    text = ('kcoord_coordinator_partitions{state="active"} 3.0\n'
            'kcoord_coordinator_partitions{state="loading"} 0.0\n'
            'kcoord_coordinator_partitions{state="failed"} 1.0\n')
    assert unready_partitions(text) == {"failed": 1.0}
    assert unready_partitions(text.replace('"loading"} 0.0', '"loading"} 2.0')) == {"loading": 2.0, "failed": 1.0}
    assert unready_partitions('kcoord_coordinator_partitions{state="active"} 3.0\n') == {}
