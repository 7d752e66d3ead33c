"""contrib/kubernetes/pinmon-daemonset.yaml: a DaemonSet that runs a command pinmon accepts, on the
node's PIDs, privileged, with every host path pinmon's readers use mounted read-only at the same
path, bounded resources, and a Service and annotations that scrape the port it listens on; that port
serves TLS only, to clients with a certificate (the files mounted from a Secret), and so does the
image's own command (contrib/kubernetes/Dockerfile)."""
from __future__ import annotations

import json
import os
import posixpath
import re

import pytest

yaml = pytest.importorskip("yaml", reason="PyYAML (the test extra) is not installed")

from pinmon.cli.listen import DEFAULT_LISTEN, parse_listen
from pinmon.cli.main import build_parser
from pinmon.collect.cgroups import names

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MANIFEST = os.path.join(ROOT, "contrib", "kubernetes", "pinmon-daemonset.yaml")
DOCKERFILE = os.path.join(ROOT, "contrib", "kubernetes", "Dockerfile")


@pytest.fixture(scope="module")
def docs():
    with open(MANIFEST, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d]


def _one(docs, kind):
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, kind
    return found[0]


def _container(docs):
    return _one(docs, "DaemonSet")["spec"]["template"]["spec"]["containers"][0]


def test_every_object_is_in_one_namespace(docs):
    ns = _one(docs, "Namespace")["metadata"]["name"]
    for d in docs:
        if d["kind"] != "Namespace":
            assert d["metadata"]["namespace"] == ns, d["kind"]


def test_the_command_is_one_pinmon_accepts_listening_beyond_loopback(docs):
    c = _container(docs)
    assert c["command"] == ["pinmon"]
    args = build_parser().parse_args(c["args"])
    host, port = args.listen
    assert args.command == "export"
    assert host == "0.0.0.0" and port == parse_listen(DEFAULT_LISTEN)[1]
    assert {p["containerPort"] for p in c["ports"]} == {port}


def test_it_sees_the_node(docs):
    spec = _one(docs, "DaemonSet")["spec"]["template"]["spec"]
    assert spec["hostPID"] is True
    assert _container(docs)["securityContext"]["privileged"] is True
    assert spec.get("automountServiceAccountToken") is False


def _mounts(docs):
    spec = _one(docs, "DaemonSet")["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    out = {}
    for m in _container(docs)["volumeMounts"]:
        assert m["name"] in volumes, m["name"]
        if "hostPath" not in volumes[m["name"]]:
            continue  # the TLS Secret
        host = volumes[m["name"]]["hostPath"]["path"]
        # pinmon reads these paths as it would on the node: each is mounted where the node has it
        assert host == m["mountPath"], m
        out[m["mountPath"]] = m
    return out


def test_host_paths_are_mounted_read_only_at_their_own_paths(docs):
    mounts = _mounts(docs)
    assert mounts and all(m.get("readOnly") is True for m in mounts.values())
    for wanted in ("/sys/fs/cgroup", "/tmp"):
        assert wanted in mounts


@pytest.mark.parametrize("parts", [names.CONTAINER_LOGS, names.POD_LOGS, names.CONTAINERD_TASKS],
                         ids=lambda p: "/".join(p))
def test_every_path_the_name_reader_uses_is_mounted(docs, parts):
    path = "/" + posixpath.join(*parts)
    mounts = _mounts(docs)
    assert any(path == m or path.startswith(m.rstrip("/") + "/") for m in mounts), path


def test_resources_are_bounded(docs):
    res = _container(docs)["resources"]
    for kind in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(res[kind]), kind


def test_prometheus_scrapes_the_port_it_listens_on(docs):
    c = _container(docs)
    port = c["ports"][0]
    template = _one(docs, "DaemonSet")["spec"]["template"]
    ann = template["metadata"]["annotations"]
    assert ann["prometheus.io/scrape"] == "true" and int(ann["prometheus.io/port"]) == port["containerPort"]
    svc = _one(docs, "Service")
    labels = template["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= labels.items()
    assert _one(docs, "DaemonSet")["spec"]["selector"]["matchLabels"].items() <= labels.items()
    sp = svc["spec"]["ports"][0]
    assert sp["targetPort"] in (port["name"], port["containerPort"]) and sp["port"] == port["containerPort"]
    assert int(svc["metadata"]["annotations"]["prometheus.io/port"]) == sp["port"]


def _tls_files(args) -> list:
    return [args.tls_cert, args.tls_key, args.tls_client_ca]


def test_it_serves_tls_only_to_clients_with_a_certificate(docs):
    args = build_parser().parse_args(_container(docs)["args"])
    assert all(_tls_files(args)), "the DaemonSet must serve https with client certificates required"
    spec = _one(docs, "DaemonSet")["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    secret_mounts = {m["mountPath"]: volumes[m["name"]]["secret"] for m in _container(docs)["volumeMounts"]
                     if "secret" in volumes[m["name"]]}
    for path in _tls_files(args):  # each file comes from the Secret, read-only, readable by root only
        directory, name = posixpath.split(path)
        assert directory in secret_mounts, path
        secret = secret_mounts[directory]
        assert secret["defaultMode"] == 0o400 and name in ("tls.crt", "tls.key", "ca.crt")
    assert all(m.get("readOnly") is True for m in _container(docs)["volumeMounts"])


def test_nothing_probes_or_scrapes_it_in_plain_http(docs):
    c = _container(docs)
    assert "httpGet" not in c["livenessProbe"] and c["livenessProbe"]["tcpSocket"]["port"] == "metrics"
    template = _one(docs, "DaemonSet")["spec"]["template"]
    assert template["metadata"]["annotations"]["prometheus.io/scheme"] == "https"
    assert _one(docs, "Service")["metadata"]["annotations"]["prometheus.io/scheme"] == "https"


def test_the_images_own_command_serves_tls_at_the_daemonsets_paths(docs):
    with open(DOCKERFILE, encoding="utf-8") as f:
        text = f.read().replace("\\\n", " ")
    cmd = json.loads(re.search(r"^CMD (\[.*\])$", text, re.M).group(1))
    assert cmd[0] == "pinmon"
    image_args = build_parser().parse_args(cmd[1:])
    assert _tls_files(image_args) == _tls_files(build_parser().parse_args(_container(docs)["args"]))
