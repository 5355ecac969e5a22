# SPDX-License-Identifier: BSD-2-Clause
"""The fleet story, end to end: the image `make image` built (its OCI layout, its root file
system, the binary run from it), the Kubernetes manifests as kustomize renders them, the
alerts under promtool, the dashboard, the systemd unit under systemd-analyze, and a running
`gpuleak serve` (with a stand-in NVML) for gzip, the pprof index, the profilers' configs and
the labels that join with dcgm-exporter, through a real Prometheus."""
import gzip
import hashlib
import http.server
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import threading
import urllib.parse
import urllib.request

import yaml

from harness import (FAKECUDA, OUTPUT, ROOT, WORKLOADS, agent_on_two_gpus, check, check_eq,
                     free_port, wait_until)
from test_serve import PROMTOOL, get, query, start_prometheus

DEPLOY = os.path.join(ROOT, "deploy")
IMAGE = os.path.join(OUTPUT, "image")
STATIC_BIN = os.path.join(OUTPUT, "static", "gpuleak")
SOURCE = "https://github.com/gpuleak/gpuleak"


def version():
    with open(os.path.join(ROOT, "Makefile")) as f:
        return re.search(r"^VERSION := (\S+)$", f.read(), re.M).group(1)


def run(argv, timeout=120, **kw):
    return subprocess.run(argv, capture_output=True, timeout=timeout, **kw)


def sha256(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def blob(layout, desc):
    """The blob a descriptor names, its digest and size checked."""
    algo, hexd = desc["digest"].split(":", 1)
    with open(os.path.join(layout, "blobs", algo, hexd), "rb") as f:
        data = f.read()
    check_eq(sha256(data), desc["digest"], f"digest of blob {desc['digest']}")
    check_eq(len(data), desc["size"], f"size of blob {desc['digest']}")
    return data


# ---- the image -------------------------------------------------------------------------

def read_layout(layout, tag):
    """Walks an OCI image layout by hand (image-spec v1): index, manifest, config, layers,
    every digest and size checked. Returns (config, [layer tar bytes])."""
    with open(os.path.join(layout, "oci-layout")) as f:
        check_eq(json.load(f).get("imageLayoutVersion"), "1.0.0", "oci-layout version")
    with open(os.path.join(layout, "index.json")) as f:
        index = json.load(f)
    check_eq(index["schemaVersion"], 2, "index schemaVersion")
    descs = [m for m in index["manifests"]
             if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag]
    check_eq(len(descs), 1, f"one manifest tagged {tag} in index.json")
    check_eq(descs[0]["mediaType"], "application/vnd.oci.image.manifest.v1+json",
             "manifest media type")
    manifest = json.loads(blob(layout, descs[0]))
    check_eq(manifest["config"]["mediaType"], "application/vnd.oci.image.config.v1+json",
             "config media type")
    config = json.loads(blob(layout, manifest["config"]))
    layers = []
    for i, desc in enumerate(manifest["layers"]):
        data = blob(layout, desc)
        mt = desc["mediaType"]
        check(mt in ("application/vnd.oci.image.layer.v1.tar",
                     "application/vnd.oci.image.layer.v1.tar+gzip"), f"layer media type {mt}")
        tar = gzip.decompress(data) if mt.endswith("+gzip") else data
        check_eq(sha256(tar), config["rootfs"]["diff_ids"][i], f"diff_id of layer {i}")
        layers.append(tar)
    check_eq(config["rootfs"]["type"], "layers", "rootfs type")
    return config, layers


def test_image_layout_and_root_filesystem(tmp):
    """`make image` (run by `make integration`) built an OCI image holding the static binary
    alone, non-root by default, labelled with version, source and revision; unpacked by
    umoci, its root file system runs the binary (chroot, as uid 65534); two builds of one
    commit are the same image; podman runs it."""
    ver = version()
    layout = os.path.join(IMAGE, "oci")
    check(os.path.isdir(layout), f"no image at {layout}: run `make image` (make integration "
          "does)")
    config, layers = read_layout(layout, ver)
    check_eq((config["os"], config["architecture"]), ("linux", "amd64"), "platform")
    cfg = config["config"]
    check_eq(cfg.get("User"), "65534:65534", "the image's default user is not root")
    check_eq(cfg.get("Entrypoint"), ["/gpuleak"], "entrypoint")
    check_eq(cfg.get("Cmd"), ["serve", "--listen", "127.0.0.1:9464"], "default command")
    labels = cfg.get("Labels", {})
    check_eq(labels.get("org.opencontainers.image.version"), ver, "version label")
    check_eq(labels.get("org.opencontainers.image.source"), SOURCE, "source label")
    rev = labels.get("org.opencontainers.image.revision", "")
    check(re.fullmatch(r"[0-9a-f]{40}", rev) is not None, f"revision label {rev!r}")
    check_eq(len(layers), 1, "one layer")
    with tarfile.open(fileobj=io.BytesIO(layers[0])) as tf:
        members = [m for m in tf.getmembers() if m.name.strip("./")]
        check_eq([m.name.lstrip("./") for m in members], ["gpuleak"],
                 "the layer holds the binary alone")
        check_eq(oct(members[0].mode & 0o7777), oct(0o755), "the binary's mode")
        binary = tf.extractfile(members[0]).read()
    with open(STATIC_BIN, "rb") as f:
        check_eq(sha256(binary), sha256(f.read()), "the image's binary is the static build")

    # the tools' view of the same layout
    p = run(["skopeo", "inspect", "--config", f"oci:{layout}:{ver}"])
    check_eq(p.returncode, 0, f"skopeo inspect: {p.stderr.decode()}")
    check_eq(json.loads(p.stdout)["config"].get("User"), "65534:65534", "skopeo sees the user")
    bundle = os.path.join(tmp, "bundle")
    p = run(["umoci", "unpack", "--image", f"{layout}:{ver}", bundle])
    check_eq(p.returncode, 0, f"umoci unpack: {p.stderr.decode()}")
    rootfs = os.path.join(bundle, "rootfs")
    check_eq(sorted(os.listdir(rootfs)), ["gpuleak"], "the root file system is the binary")
    with open(os.path.join(bundle, "config.json")) as f:
        runtime = json.load(f)
    check_eq(runtime["process"]["args"], ["/gpuleak", "serve", "--listen", "127.0.0.1:9464"],
             "the runtime bundle's command")
    check_eq((runtime["process"]["user"]["uid"], runtime["process"]["user"]["gid"]),
             (65534, 65534), "the runtime bundle's user")
    # nothing but the binary in the root: no libc, no loader, no shell
    p = run(["unshare", "--mount", "--pid", "--fork", "--kill-child", "chroot",
             "--userspec=65534:65534", rootfs, "/gpuleak", "--version"], timeout=30)
    check_eq(p.returncode, 0, f"the binary in its root file system: {p.stderr.decode()}")
    check_eq(p.stdout.decode().split()[:2], ["gpuleak", ver], "version from the image's binary")
    p = run(["unshare", "--mount", "--pid", "--fork", "--kill-child", "chroot",
             "--userspec=65534:65534", rootfs, "/gpuleak", "serve", "--help"], timeout=30)
    check("--state-dir" in (p.stdout + p.stderr).decode(), "serve --help from the image")

    # reproducible: the same commit and binary give the same image, to the digest
    digests = []
    for n in range(2):
        out = os.path.join(tmp, f"build{n}")
        p = run([os.path.join(ROOT, "scripts", "build-image"), STATIC_BIN, out, ver])
        check_eq(p.returncode, 0, f"build-image: {p.stderr.decode()}")
        with open(os.path.join(out, "oci", "index.json")) as f:
            digests.append(json.load(f)["manifests"][0]["digest"])
    check_eq(digests[0], digests[1], "two builds of one commit")

    archive = os.path.join(IMAGE, f"gpuleak-{ver}-amd64.tar")
    check(os.path.getsize(archive) < 8 << 20, f"the image is small: {os.path.getsize(archive)}")
    p = podman(tmp, "run", "--rm", "--network", "none", f"oci-archive:{archive}", "--version")
    check_eq(p.returncode, 0, f"podman run: {p.stderr.decode()}")
    check_eq(p.stdout.decode().split()[:2], ["gpuleak", ver], "podman run --version")


def podman(tmp, *args, timeout=120):
    """podman as root with storage of its own under tmp. Two things of this build machine
    need working around, neither of them the image's: rootful podman raises RLIMIT_NOFILE
    and RLIMIT_NPROC above the hard limits here, which takes CAP_SYS_RESOURCE, which the
    container this runs in lacks (so the limits are set lower); and crun refuses its hybrid
    cgroup v1/v2 layout ("cgroups in hybrid mode not supported"), so runc runs it."""
    return run(["podman", "--root", os.path.join(tmp, "ps"), "--runroot",
                os.path.join(tmp, "pr"), "--storage-driver", "vfs", *args[:1],
                *(["--runtime", "runc", "--ulimit", "nofile=1024:1024", "--ulimit",
                   "nproc=4096:4096"] if args[0] == "run" else []), *args[1:]],
               timeout=timeout)


def test_image_serves_as_the_agent_in_a_container(tmp):
    """The image run as the DaemonSet runs it: uid 0 with every capability dropped but the
    manifest's, a read-only root file system, the host's PID namespace, the kernel's BTF
    mounted, seccomp unconfined. It attaches, and the device memory of a workload started
    afterwards shows in its /metrics to the byte."""
    ver = version()
    with open(os.path.join(DEPLOY, "kubernetes", "daemonset.yaml")) as f:
        ds = [d for d in yaml.safe_load_all(f) if d and d["kind"] == "DaemonSet"][0]
    sc = ds["spec"]["template"]["spec"]["containers"][0]["securityContext"]
    caps = sc["capabilities"]["add"]
    check_eq((sc["runAsUser"], sc["readOnlyRootFilesystem"], sc["seccompProfile"]["type"]),
             (0, True, "Unconfined"), "the DaemonSet's security context")
    archive = os.path.join(IMAGE, f"gpuleak-{ver}-amd64.tar")
    fakecuda = os.path.dirname(FAKECUDA)
    port = free_port()
    name = f"gpuleak-test-{os.getpid()}-{port}"
    p = podman(tmp, "run", "-d", "--name", name, "--network", "host", "--pid", "host",
               "--user", "0", "--read-only", "--cap-drop", "ALL", "--cap-add", ",".join(caps),
               "--security-opt", "seccomp=unconfined",
               "-v", "/sys/kernel/btf:/sys/kernel/btf:ro", "-v", f"{fakecuda}:{fakecuda}:ro",
               f"oci-archive:{archive}", "serve", "--libcuda", FAKECUDA,
               "--listen", f"127.0.0.1:{port}")
    check_eq(p.returncode, 0, f"podman run -d: {p.stderr.decode()}")
    wl = None

    def logs():
        return podman(tmp, "logs", name, timeout=30).stderr.decode()
    try:
        def serving():
            if "serving http://" in logs():
                return True
            st = podman(tmp, "inspect", "-f", "{{.State.Running}}", name, timeout=30)
            if st.stdout.decode().strip() != "true":
                raise AssertionError(f"the container stopped:\n{logs()}")
            return False
        wait_until(serving, 60, "the agent in its container to listen")
        check("capabilities kept: " in logs(), "the agent gave up what it does not need")
        wl = subprocess.Popen([os.path.join(WORKLOADS, "wl_basic"), "--no-wait", "--hold"],
                              stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
        series = f'gpuleak_process_memory_bytes{{pid="{wl.pid}",'
        seen = []

        def counted():
            try:
                text = get(f"http://127.0.0.1:{port}/metrics", timeout=20)
            except OSError:
                return False
            seen[:] = [ln.split()[-1] for ln in text.splitlines()
                       if ln.startswith(series) and 'class="device"' in ln]
            return seen == ["5605632"]
        wait_until(counted, 30, f"the workload's device bytes from the container: {seen}")
    finally:
        if wl:
            wl.kill()
            wl.wait()
        podman(tmp, "stop", "-t", "10", name, timeout=60)
        out = logs()
        podman(tmp, "rm", "-f", name, timeout=60)
    check("stopped" in out, f"the agent stopped cleanly on SIGTERM:\n{out}")


# ---- Kubernetes --------------------------------------------------------------------------

def kustomize(path):
    if not shutil.which("kubectl"):
        raise AssertionError("kubectl is missing (it renders the manifests: `kubectl "
                             "kustomize`); Debian has no kustomize package")
    p = run(["kubectl", "kustomize", path], timeout=60)
    check_eq(p.returncode, 0, f"kubectl kustomize {path}: {p.stderr.decode()}")
    return [d for d in yaml.safe_load_all(p.stdout) if d]


def one(docs, kind, name="gpuleak"):
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    check_eq(len(found), 1, f"one {kind} {name}")
    return found[0]


def containers(docs):
    return {c["name"]: c for c in one(docs, "DaemonSet")["spec"]["template"]["spec"]["containers"]}


def test_kustomize_renders_plain_and_optional_parts(tmp):
    """kubectl kustomize renders the plain manifests without any Prometheus Operator kind,
    with an image one sets in an overlay; the operator's overlay adds a ServiceMonitor and a
    PrometheusRule equal to the rules file; the kube-rbac-proxy overlay puts the agent on
    loopback behind an authenticating HTTPS proxy that alone holds an API token."""
    ver = version()
    plain = kustomize(os.path.join(DEPLOY, "kubernetes"))
    check_eq(sorted(d["kind"] for d in plain), ["DaemonSet", "Namespace", "Service",
                                                "ServiceAccount"], "the plain kinds")
    check(not [d for d in plain if "coreos.com" in d["apiVersion"]], "no CRD kinds in plain")
    check_eq(containers(plain)["gpuleak"]["image"], f"localhost/gpuleak:{ver}",
             "the default image is the one make image builds")

    # the image one sets: an overlay of one's own
    ov = os.path.join(tmp, "overlay")
    os.makedirs(ov)
    with open(os.path.join(ov, "kustomization.yaml"), "w") as f:
        yaml.safe_dump({"resources": [os.path.relpath(os.path.join(DEPLOY, "kubernetes"), ov)],
                        "images": [{"name": "localhost/gpuleak",
                                    "newName": "registry.example/ml/gpuleak",
                                    "newTag": "1.2.3"}]}, f)
    check_eq(containers(kustomize(ov))["gpuleak"]["image"], "registry.example/ml/gpuleak:1.2.3",
             "the image set in an overlay")

    op = kustomize(os.path.join(DEPLOY, "overlays", "prometheus-operator"))
    sm, rule = one(op, "ServiceMonitor"), one(op, "PrometheusRule")
    svc = one(op, "Service")
    check_eq(sm["spec"]["endpoints"][0]["port"], svc["spec"]["ports"][0]["name"],
             "the ServiceMonitor scrapes the Service's port")
    with open(os.path.join(DEPLOY, "prometheus", "gpuleak-rules.yaml")) as f:
        check_eq(rule["spec"]["groups"], yaml.safe_load(f)["groups"],
                 "the PrometheusRule is the rules file")
    p = run([os.path.join(ROOT, "scripts", "gen-prometheusrule"), "--check"])
    check_eq(p.returncode, 0, f"gen-prometheusrule --check: {p.stderr.decode()}")

    rb = kustomize(os.path.join(DEPLOY, "overlays", "kube-rbac-proxy"))
    c = containers(rb)
    check_eq(sorted(c), ["gpuleak", "kube-rbac-proxy"], "the agent and its proxy")
    agent, proxy = c["gpuleak"], c["kube-rbac-proxy"]
    check("--listen=127.0.0.1:9464" in agent["args"], f"the agent on loopback: {agent['args']}")
    check(not [a for a in agent["args"] if "POD_IP" in a], "the agent not on the pod's address")
    check("ports" not in agent and "livenessProbe" not in agent, "the agent exposes no port")
    check("--upstream=http://127.0.0.1:9464/" in proxy["args"], "the proxy's upstream")
    check("--secure-listen-address=$(POD_IP):8443" in proxy["args"], "the proxy's address")
    check_eq({p["name"]: p["containerPort"] for p in proxy["ports"]}, {"https": 8443},
             "the proxy's port")
    for probe in ("livenessProbe", "readinessProbe"):
        check_eq((proxy[probe]["httpGet"]["path"], proxy[probe]["httpGet"]["scheme"]),
                 ("/healthz", "HTTPS"), f"the proxy's {probe}")
    check("--ignore-paths=/healthz" in proxy["args"], "the probes' path needs no token")
    check(proxy["image"].startswith("quay.io/brancz/kube-rbac-proxy:"), "the proxy's image")
    pod = one(rb, "DaemonSet")["spec"]["template"]["spec"]
    check_eq(pod.get("automountServiceAccountToken"), False, "no token for the pod at large")
    vols = {v["name"]: v for v in pod["volumes"]}
    tok = [m for m in proxy["volumeMounts"]
           if m["mountPath"] == "/var/run/secrets/kubernetes.io/serviceaccount"]
    check(tok and "projected" in vols[tok[0]["name"]], "the proxy's own projected token")
    check(not [m for m in agent["volumeMounts"] if "serviceaccount" in m["mountPath"]],
          "the agent has no API token")
    svc = one(rb, "Service")
    check_eq([(p["name"], p["port"], p["targetPort"]) for p in svc["spec"]["ports"]],
             [("https", 8443, "https")], "the Service's port is the proxy's")
    ep = one(rb, "ServiceMonitor")["spec"]["endpoints"][0]
    check_eq((ep["port"], ep["scheme"]), ("https", "https"), "the monitor scrapes HTTPS")
    check("bearerTokenFile" in ep, "the monitor sends Prometheus' token")
    roles = {d["metadata"]["name"]: d for d in rb if d["kind"] == "ClusterRole"}
    res = {r for rule in roles["gpuleak-kube-rbac-proxy"]["rules"] for r in rule["resources"]}
    check_eq(res, {"tokenreviews", "subjectaccessreviews"}, "what the proxy may ask")
    urls = roles["gpuleak-metrics-reader"]["rules"][0]["nonResourceURLs"]
    check("/metrics" in urls and "/debug/pprof/gpu_heap" in urls, f"the reader's URLs {urls}")
    binding = one(rb, "ClusterRoleBinding", "gpuleak-kube-rbac-proxy")
    check_eq(binding["subjects"], [{"kind": "ServiceAccount", "name": "gpuleak",
                                    "namespace": "gpuleak"}], "the proxy's binding")


# ---- alerts and the dashboard ---------------------------------------------------------------

def test_rules_check_and_unit_tests(tmp):
    """promtool check rules and promtool test rules (synthetic series of gpuleak and
    dcgm-exporter: the alerts fire when they should and not before, the join works without
    label_replace); the example Prometheus config is valid."""
    rules = os.path.join(DEPLOY, "prometheus", "gpuleak-rules.yaml")
    p = run([PROMTOOL, "check", "rules", rules])
    check_eq(p.returncode, 0, f"promtool check rules: {p.stdout.decode()}{p.stderr.decode()}")
    check("SUCCESS: 8 rules found" in p.stdout.decode(), p.stdout.decode())
    p = run([PROMTOOL, "test", "rules", os.path.join(DEPLOY, "prometheus",
                                                      "gpuleak-rules.test.yaml")])
    check_eq(p.returncode, 0, f"promtool test rules: {p.stdout.decode()}{p.stderr.decode()}")
    with open(os.path.join(DEPLOY, "prometheus", "gpuleak-rules.test.yaml")) as f:
        tests = yaml.safe_load(f)["tests"]
    with open(rules) as f:
        alerts = {r["alert"] for g in yaml.safe_load(f)["groups"] for r in g["rules"]
                  if "alert" in r}
    tested = {t["alertname"] for u in tests for t in u.get("alert_rule_test", [])
              if t.get("exp_alerts")}
    check_eq(sorted(alerts - tested), [], "every alert is seen firing in the unit tests")
    p = run([PROMTOOL, "check", "config", os.path.join(DEPLOY, "prometheus", "prometheus.yaml")])
    check_eq(p.returncode, 0, f"promtool check config: {p.stdout.decode()}{p.stderr.decode()}")


PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or",
                "unless", "offset", "bool", "inf", "nan"}


def metric_names(expr):
    """The metric names an expression reads: strings, label matchers, ranges and grouping
    lists removed, then every identifier not followed by '(' (a function)."""
    e = re.sub(r'"(\\.|[^"\\])*"', '""', expr)
    e = re.sub(r"\{[^}]*\}", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", e):
        rest = e[m.end():].lstrip()
        if m.group(0).lower() in PROMQL_WORDS or rest.startswith("("):
            continue
        if re.fullmatch(r"\d+[smhdwy]", m.group(0)):
            continue
        names.add(m.group(0))
    return names


def dashboard_exprs():
    with open(os.path.join(DEPLOY, "grafana", "gpuleak.json")) as f:
        dash = json.load(f)
    out, cells = [], {}
    for panel in dash["panels"]:
        g = panel["gridPos"]
        check(g["x"] + g["w"] <= 24, f"panel {panel['title']!r} fits the grid's 24 columns")
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                check((x, y) not in cells, f"panels {cells.get((x, y))!r} and "
                      f"{panel['title']!r} overlap")
                cells[(x, y)] = panel["title"]
        if panel["type"] == "row":
            continue
        check(panel["targets"], f"panel {panel['title']!r} has a query")
        check_eq(panel["datasource"]["uid"], "${datasource}", f"{panel['title']}'s datasource")
        for t in panel["targets"]:
            out.append((panel["title"], t["expr"]))
    for var in dash["templating"]["list"]:
        if var["type"] == "query":
            q = var["query"]["query"]
            m = re.fullmatch(r"label_values\((.*), *(\w+)\)", q)
            check(m is not None, f"variable {var['name']}: {q}")
            out.append((f"variable {var['name']}", m.group(1)))
    return dash, out


def check_names_and_syntax(tmp, exprs, exported, records):
    """Every expression parses (promtool check rules on recording rules made of them) and
    names metrics gpuleak exports (or dcgm-exporter's, or up, or one of our records)."""
    subst = [("$__rate_interval", "5m"), ("$__interval", "1m"), ("$instance", ".*"),
             ("$namespace", ".*"), ("$pod", ".*")]
    rules = []
    for i, (where, e) in enumerate(exprs):
        for a, b in subst:
            e = e.replace(a, b)
        check("$" not in e, f"{where}: an unknown variable in {e}")
        rules.append({"record": f"check:expr_{i}", "expr": e})
        for name in metric_names(e):
            check(name in exported or name in records or name.startswith("DCGM_FI_") or
                  name == "up", f"{where}: {name} is not a metric gpuleak exports")
    path = os.path.join(tmp, "exprs.yaml")
    with open(path, "w") as f:
        yaml.safe_dump({"groups": [{"name": "check", "rules": rules}]}, f)
    p = run([PROMTOOL, "check", "rules", path])
    check_eq(p.returncode, 0, f"an expression does not parse: {p.stdout.decode()}"
             f"{p.stderr.decode()}")


# ---- a running agent -------------------------------------------------------------------

def dcgm_text(host):
    """dcgm-exporter's exposition (its label names) for the two stand-in GPUs, in MiB."""
    out = []
    for field, values in (("USED", (0, 4096)), ("FREE", (143000, 138904))):
        name = f"DCGM_FI_DEV_FB_{field}"
        out.append(f"# HELP {name} Framebuffer memory {field.lower()} (in MiB).")
        out.append(f"# TYPE {name} gauge")
        for i, v in enumerate(values):
            out.append(f'{name}{{gpu="{i}",UUID="GPU-fake-{i}",device="nvidia{i}",'
                       f'modelName="NVIDIA H200",Hostname="{host}"}} {v}')
    return "\n".join(out) + "\n"


class DcgmStandIn:
    """Serves a dcgm-exporter exposition (its label names and spellings) on loopback."""

    def __init__(self):
        text = dcgm_text(os.uname().nodename).encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(text)))
                self.end_headers()
                self.wfile.write(text)

            def log_message(self, *args):
                pass
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def fetch(url, headers=None):
    req = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(req, timeout=20) as r:
        return r.status, dict(r.headers), r.read()


def test_serve_fleet_endpoints_and_dcgm_join(tmp):
    """A running agent with a stand-in NVML of two GPUs: the process NVML lists on GPU 1
    (CUDA ordinal 0) gets gpu="1" and UUID on its device series, promtool check metrics
    passes, /metrics is gzipped when asked, the pprof index and / link to what exists,
    every path the Parca and Alloy configs enable answers a gzipped profile, the dashboard
    and the alerts name only exported metrics, and a real Prometheus scraping the agent and
    a dcgm-exporter stand-in joins them with the README's query."""
    agent, port, nvml = agent_on_two_gpus(tmp)
    base = f"http://127.0.0.1:{port}"
    wl, dcgm, prom = None, None, None
    try:
        agent.wait_serving()
        wl = subprocess.Popen([os.path.join(WORKLOADS, "wl_basic"), "--no-wait", "--hold"],
                              stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
        with open(nvml, "a") as f:
            f.write(f"proc 1 {wl.pid} {6 << 20}\n")
        want = (f'cuda_device="0",gpu="1",UUID="GPU-fake-1"}}')
        line = []

        def labelled():
            try:
                text = get(f"{base}/metrics", timeout=20)
            except OSError:
                return False  # a loaded machine: attaching to others' new processes
            line[:] = [ln for ln in text.splitlines()
                       if ln.startswith("gpuleak_process_device_memory_bytes{") and
                       f'pid="{wl.pid}"' in ln]
            return line and want in line[0]
        # NVML is sampled every 10 s
        wait_until(labelled, 60, f"the workload's device series with {want}")
        check_eq(line[0].split()[-1], "5605632", "its device bytes")

        text = get(f"{base}/metrics", timeout=20)
        check("gpu_uuid=" not in text, "UUID is spelled as dcgm-exporter spells it")
        p = run([PROMTOOL, "check", "metrics"], input=text.encode(), timeout=20)
        check_eq(p.returncode, 0, f"promtool check metrics: {p.stdout!r} {p.stderr!r}")
        exported = set(re.findall(r"^# TYPE (\S+) ", text, re.M))

        # gzip when asked, plain when not
        st, hdr, body = fetch(f"{base}/metrics", {"Accept-Encoding": "gzip"})
        check_eq((st, hdr.get("Content-Encoding")), (200, "gzip"), "gzip when asked")
        check_eq(hdr.get("Vary"), "Accept-Encoding", "Vary")
        plain = gzip.decompress(body)
        check(len(body) * 3 < len(plain), f"compressed {len(plain)} -> {len(body)} bytes")
        p = run([PROMTOOL, "check", "metrics"], input=plain, timeout=20)
        check_eq(p.returncode, 0, f"promtool check metrics, gunzipped: {p.stderr!r}")
        st, hdr, body = fetch(f"{base}/metrics")
        check("Content-Encoding" not in hdr and body.startswith(b"# HELP"), "plain when not")
        st, hdr, body = fetch(f"{base}/metrics", {"Accept-Encoding": "br, gzip;q=0"})
        check("Content-Encoding" not in hdr, "gzip refused with q=0")
        st, hdr, body = fetch(f"{base}/debug/pprof/gpu_heap", {"Accept-Encoding": "gzip"})
        check("Content-Encoding" not in hdr and body[:2] == b"\x1f\x8b",
              "the profile, gzipped already, is not wrapped again")

        # the index pages: every link answers
        for page, links in (("/", {"metrics", "debug/pprof/", "debug/pprof/gpu_heap", "incidents",
                                   "healthz"}),
                            ("/debug/pprof/", {"gpu_heap"})):
            st, hdr, body = fetch(base + page)
            check_eq((st, hdr.get("Content-Type")), (200, "text/html; charset=utf-8"), page)
            found = set(re.findall(r'href="([^"]+)"', body.decode()))
            check_eq(found, links, f"the links of {page}")
            for link in found:
                st, _, _ = fetch(urllib.parse.urljoin(base + page, link))
                check_eq(st, 200, f"{page} links to {link}")

        # the profilers' configs: what they enable exists, and is a gzipped pprof
        with open(os.path.join(DEPLOY, "profiling", "parca.yaml")) as f:
            parca = yaml.safe_load(f)
        paths = []
        for job in parca["scrape_configs"]:
            for name, c in job["profiling_config"]["pprof_config"].items():
                if c.get("enabled"):
                    check_eq(c.get("delta"), False, f"parca {name}: a cumulative profile")
                    paths.append(c["path"])
        with open(os.path.join(DEPLOY, "profiling", "config.alloy")) as f:
            alloy = f.read()
        blocks = re.findall(r'profile\.(\w+)(?: "(\w+)")? \{([^}]*)\}', alloy)
        check(len(blocks) >= 7, f"Alloy's profile blocks: {blocks}")
        for kind, name, body in blocks:
            if "enabled = true" in body:
                check("delta   = false" in body, f"alloy {kind} {name}: cumulative")
                paths.append(re.search(r'path += "([^"]+)"', body).group(1))
        check_eq(sorted(set(paths)), ["/debug/pprof/gpu_heap"], "enabled profile paths")
        for path in paths:
            st, hdr, body = fetch(base + path)
            check_eq((st, body[:2]), (200, b"\x1f\x8b"), f"{path} answers a gzipped profile")

        # the dashboard and the rules read only what is exported
        with open(os.path.join(DEPLOY, "prometheus", "gpuleak-rules.yaml")) as f:
            rule_list = [r for g in yaml.safe_load(f)["groups"] for r in g["rules"]]
        records = {r["record"] for r in rule_list if "record" in r}
        dash, exprs = dashboard_exprs()
        check(len(exprs) >= 20, f"the dashboard's queries: {len(exprs)}")
        titles = " ".join(p["title"] for p in dash["panels"])
        for row in ("Agent health", "Per node", "Per pod", "Per GPU"):
            check(row in titles, f"dashboard row {row!r}")
        check_names_and_syntax(tmp, exprs, exported, records)
        check_names_and_syntax(tmp, [(r.get("alert") or r["record"], r["expr"])
                                     for r in rule_list], exported, records)

        # the join, in a real Prometheus, with dcgm-exporter's series beside gpuleak's
        dcgm = DcgmStandIn()
        prom, prom_url = start_prometheus(tmp, [("gpuleak", f"127.0.0.1:{port}"),
                                                ("dcgm-exporter", f"127.0.0.1:{dcgm.port}")])
        q = ("gpuleak_process_device_memory_bytes * on(UUID) group_left(modelName) "
             "DCGM_FI_DEV_FB_USED")
        res = []

        def joined():
            res[:] = [r for r in query(prom_url, q)
                      if r["metric"].get("pid") == str(wl.pid)]
            return bool(res)
        wait_until(joined, 20, "the README's join to answer in Prometheus")
        m = res[0]["metric"]
        check_eq((m.get("UUID"), m.get("gpu"), m.get("modelName")),
                 ("GPU-fake-1", "1", "NVIDIA H200"), "the joined series' labels")
        check_eq(float(res[0]["value"][1]), 5605632.0 * 4096, "the joined value")
        share = query(prom_url, "gpuleak_process_device_memory_bytes / on(UUID) "
                      "group_left(modelName, Hostname) (DCGM_FI_DEV_FB_USED * 1048576)")
        share = [r for r in share if r["metric"].get("pid") == str(wl.pid)]
        check_eq(len(share), 1, "the share of the GPU's used memory")
        check(abs(float(share[0]["value"][1]) - 5605632 / (4096 << 20)) < 1e-9,
              f"the share: {share[0]['value'][1]}")
    finally:
        if wl and wl.poll() is None:
            wl.kill()
        if wl:
            wl.wait()
        if prom:
            prom.kill()
            prom.wait()
        if dcgm:
            dcgm.close()
        rc = agent.stop()
    check_eq(rc, 0, f"exit status on SIGTERM:\n{agent.stderr()}")


# ---- systemd -------------------------------------------------------------------------------

def test_systemd_unit_verifies(tmp):
    """systemd-analyze verify passes on the unit as shipped (in a root holding the
    binary where ExecStart names it and the host's system units), with no warning; and it
    is not a formality: an unknown key in a copy is reported. NVML's devices stay visible
    (no PrivateDevices; DevicePolicy closed with the NVIDIA devices allowed)."""
    unit = os.path.join(DEPLOY, "systemd", "gpuleak.service")
    with open(unit) as f:
        text = f.read()
    check(not re.search(r"^PrivateDevices=(yes|true|1)", text, re.M),
          "PrivateDevices would hide /dev/nvidia*")
    check("DeviceAllow=char-nvidia-frontend rw" in text, "NVML's devices allowed")
    exec_start = re.search(r"^ExecStart=(\S+)", text, re.M).group(1)
    root = os.path.join(tmp, "root")
    os.makedirs(os.path.join(root, "etc", "systemd", "system"))
    os.makedirs(os.path.join(root, os.path.dirname(exec_start).lstrip("/")))
    shutil.copy(STATIC_BIN, os.path.join(root, exec_start.lstrip("/")))
    shutil.copytree("/usr/lib/systemd/system", os.path.join(root, "usr", "lib", "systemd",
                                                              "system"), symlinks=True)
    dst = os.path.join(root, "etc", "systemd", "system", "gpuleak.service")
    shutil.copy(unit, dst)
    p = run(["systemd-analyze", "verify", f"--root={root}", "gpuleak.service"], timeout=60)
    out = (p.stdout + p.stderr).decode()
    check_eq((p.returncode, out), (0, ""), "systemd-analyze verify")
    with open(dst, "a") as f:
        f.write("NoSuchKey=1\n")
    p = run(["systemd-analyze", "verify", f"--root={root}", "gpuleak.service"], timeout=60)
    check("Unknown key" in (p.stdout + p.stderr).decode(), "verify reads the unit")
