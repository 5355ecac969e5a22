#!/usr/bin/python3
# SPDX-License-Identifier: BSD-2-Clause
"""Checks deploy/: the Kubernetes manifests (the plain ones and the Prometheus Operator's
component) parse and agree with each other (kinds,
selectors match labels, ports agree, security context, GPU nodes only, host PID
namespace), the systemd unit is hardened and writes only to its state directory, and the
Containerfile ships the static binary alone. Needs PyYAML (Debian: python3-yaml).
Prints one line per problem; exits 1 if there is any."""
import os
import re
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
NEEDED_CAPS = {"BPF", "PERFMON", "SYS_PTRACE", "KILL"}
# SYS_NICE: the ring-copying thread's nice -10 (optional: it runs as the rest without)
ALLOWED_CAPS = NEEDED_CAPS | {"SYS_ADMIN", "DAC_READ_SEARCH", "SYS_NICE"}
problems = []


def need(cond, msg):
    if not cond:
        problems.append(msg)


def subset(sel, labels):
    return bool(sel) and all(labels.get(k) == v for k, v in sel.items())


def load_k8s():
    docs = []
    kdir = os.path.join(HERE, "kubernetes")
    for sub in ("", os.path.join("components", "prometheus-operator")):
        d = os.path.join(kdir, sub)
        for name in sorted(os.listdir(d)):
            if name.endswith(".yaml") and name != "kustomization.yaml":
                with open(os.path.join(d, name)) as f:
                    docs += [(name, doc) for doc in yaml.safe_load_all(f) if doc]
        with open(os.path.join(d, "kustomization.yaml")) as f:
            kust = yaml.safe_load(f)
        for r in kust["resources"]:
            need(os.path.exists(os.path.join(d, r)), f"kustomization: {r} does not exist")
    return docs


def check_k8s():
    docs = load_k8s()
    by_kind = {}
    for name, d in docs:
        need("apiVersion" in d and "kind" in d, f"{name}: a document without apiVersion/kind")
        by_kind.setdefault(d["kind"], []).append(d)
    for kind in ("Namespace", "ServiceAccount", "DaemonSet", "Service", "ServiceMonitor",
                 "PodMonitor", "PrometheusRule"):
        need(len(by_kind.get(kind, [])) == 1, f"expected one {kind}")
    ds, svc = by_kind["DaemonSet"][0], by_kind["Service"][0]
    sm, pm = by_kind["ServiceMonitor"][0], by_kind["PodMonitor"][0]
    ns = by_kind["Namespace"][0]["metadata"]["name"]
    for kind, objs in by_kind.items():
        if kind != "Namespace":
            need(objs[0]["metadata"].get("namespace") == ns, f"{kind} is not in namespace {ns}")
    need(ds["apiVersion"] == "apps/v1", "DaemonSet apiVersion apps/v1")
    spec, tmpl = ds["spec"], ds["spec"]["template"]
    pod_labels = tmpl["metadata"]["labels"]
    pod = tmpl["spec"]
    need(subset(spec["selector"]["matchLabels"], pod_labels),
         "DaemonSet selector does not match its pod template's labels")
    need(pod.get("hostPID") is True, "hostPID: true (BPF reports host PIDs)")
    need(pod.get("hostNetwork") is not True, "no hostNetwork")
    need(pod.get("serviceAccountName") in [s["metadata"]["name"]
                                           for s in by_kind["ServiceAccount"]],
         "serviceAccountName names the ServiceAccount")
    terms = (pod.get("affinity", {}).get("nodeAffinity", {})
             .get("requiredDuringSchedulingIgnoredDuringExecution", {})
             .get("nodeSelectorTerms", []))
    gpu_keys = [e["key"] for t in terms for e in t.get("matchExpressions", [])]
    gpu_keys += list(pod.get("nodeSelector", {}))
    need(any("gpu" in k for k in gpu_keys), "GPU nodes only: a node selector on a GPU label")

    need(len(pod["containers"]) == 1, "one container")
    c = pod["containers"][0]
    args = c.get("args", [])
    need(args[:1] == ["serve"], "the container runs `gpuleak serve`")
    listen = [a.split("=", 1)[1] for a in args if a.startswith("--listen=")]
    need(listen and not listen[0].startswith(("0.0.0.0", "[::]")),
         "--listen names the pod's address, not every interface")
    ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
    need(ports.get("metrics") == 9464, "container port 'metrics' is 9464")
    need(listen and listen[0].endswith(f":{ports.get('metrics')}"),
         "--listen's port is the container port")
    for probe in ("livenessProbe", "readinessProbe"):
        p = c.get(probe, {}).get("httpGet", {})
        need(p.get("port") in ports or p.get("port") in ports.values(),
             f"{probe} targets a declared port")
    sc = c.get("securityContext", {})
    need(sc.get("readOnlyRootFilesystem") is True, "readOnlyRootFilesystem: true")
    need(sc.get("privileged") is False, "privileged: false (true is the documented fallback)")
    need(sc.get("allowPrivilegeEscalation") is False, "allowPrivilegeEscalation: false")
    caps = sc.get("capabilities", {})
    need(caps.get("drop") == ["ALL"], "capabilities: drop ALL")
    added = set(caps.get("add", []))
    need(NEEDED_CAPS <= added, f"capabilities add {sorted(NEEDED_CAPS - added)}")
    need(added <= ALLOWED_CAPS, f"capabilities beyond need: {sorted(added - ALLOWED_CAPS)}")
    need(c.get("resources", {}).get("limits", {}).get("memory"), "a memory limit")
    need(c.get("resources", {}).get("requests", {}).get("cpu"), "a CPU request")
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
    for m in mounts.values():
        need(m["name"] in vols, f"volumeMount {m['name']} has no volume")
        v = vols.get(m["name"], {})
        # writable host paths: the BPF file system alone (the book of holds agents share)
        if "hostPath" in v and v["hostPath"]["path"] != "/sys/fs/bpf":
            need(m.get("readOnly") is True, f"hostPath {v['hostPath']['path']} mounted read-only")
    need("/sys/kernel/btf" in mounts, "/sys/kernel/btf mounted")
    need("/sys/fs/bpf" in mounts, "/sys/fs/bpf mounted (the book of holds agents share)")
    state = [a.split("=", 1)[1] for a in args if a.startswith("--state-dir=")]
    need(state and state[0] in mounts and "emptyDir" in vols.get(mounts[state[0]]["name"], {}),
         "--state-dir is a writable emptyDir volume (the root filesystem is read-only)")
    prof = [a.split("=", 1)[1] for a in args if a.startswith("--profile-dir=")]
    need(not prof or (state and prof[0].startswith(state[0] + "/")),
         "--profile-dir inside --state-dir")

    need(subset(svc["spec"]["selector"], pod_labels), "Service selector matches the pods")
    sp = {p["name"]: p for p in svc["spec"]["ports"]}
    need("metrics" in sp and sp["metrics"]["targetPort"] in ("metrics", 9464),
         "Service port 'metrics' targets the container port")
    need(subset(sm["spec"]["selector"]["matchLabels"], svc["metadata"]["labels"]),
         "ServiceMonitor selector matches the Service's labels")
    need(ns in sm["spec"]["namespaceSelector"]["matchNames"], "ServiceMonitor namespace")
    need([e["port"] for e in sm["spec"]["endpoints"]] == ["metrics"],
         "ServiceMonitor scrapes the Service's 'metrics' port")
    need(subset(pm["spec"]["selector"]["matchLabels"], pod_labels),
         "PodMonitor selector matches the pods")
    need([e["port"] for e in pm["spec"]["podMetricsEndpoints"]] == ["metrics"],
         "PodMonitor scrapes the container's 'metrics' port")
    for e in sm["spec"]["endpoints"] + pm["spec"]["podMetricsEndpoints"]:
        need(e.get("path") == "/metrics", "monitors scrape /metrics")


def check_systemd():
    unit = {}
    with open(os.path.join(HERE, "systemd", "gpuleak.service")) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith(("#", "[")):
                k, _, v = line.partition("=")
                unit[k] = v
    exec_start = unit.get("ExecStart", "")
    need(" serve " in exec_start, "ExecStart runs gpuleak serve")
    m = re.search(r"--state-dir (\S+)", exec_start)
    need(m and m.group(1) == "/var/lib/" + unit.get("StateDirectory", "?"),
         "--state-dir is the unit's StateDirectory")
    m = re.search(r"--listen (\S+)", exec_start)
    need(m and m.group(1).startswith("127.0.0.1:"), "the unit listens on loopback")
    bounding = set(unit.get("CapabilityBoundingSet", "").split())
    need({"CAP_" + c for c in NEEDED_CAPS} <= bounding <= {"CAP_" + c for c in ALLOWED_CAPS},
         f"CapabilityBoundingSet: {sorted(bounding)}")
    for k, v in (("ProtectSystem", "strict"), ("NoNewPrivileges", "yes"),
                 ("PrivateTmp", "yes"), ("UMask", "0077")):
        need(unit.get(k) == v, f"{k}={v}")


def check_containerfile():
    with open(os.path.join(HERE, "Containerfile")) as f:
        lines = [l.strip() for l in f if l.strip() and not l.startswith("#")]
    froms = [l for l in lines if l.startswith("FROM ")]
    need(froms == ["FROM scratch"], "the image is the static binary alone (FROM scratch)")
    need(any(l.startswith("USER ") and not l.startswith(("USER 0", "USER root")) for l in lines),
         "the image's default user is not root")
    need(any(l.startswith("COPY gpuleak ") for l in lines), "COPY the binary")
    need(any(l.startswith("ENTRYPOINT") and "/gpuleak" in l for l in lines), "ENTRYPOINT")


def main():
    for check in (check_k8s, check_systemd, check_containerfile):
        try:
            check()
        except (KeyError, IndexError, TypeError, yaml.YAMLError) as e:
            problems.append(f"{check.__name__}: malformed: {e!r}")
    for p in problems:
        print(f"deploy: {p}")
    print(f"deploy: {'ok' if not problems else f'{len(problems)} problems'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
