#!/usr/bin/env python3
"""Checks the Kubernetes manifests: valid YAML, and the fields a DaemonSet
needs and that roce-route relies on. Prints the command lines of the init
container and the main container as JSON (for tests/deploy.rs to run them
outside a container). Exit 1 with a message on the first problem."""

import json
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent


def fail(msg: str) -> None:
    print(f"deploy/kubernetes: {msg}", file=sys.stderr)
    sys.exit(1)


def main() -> None:
    docs = []
    for name in ("configmap.yaml", "daemonset.yaml"):
        try:
            docs += [d for d in yaml.safe_load_all((HERE / name).read_text()) if d]
        except yaml.YAMLError as e:
            fail(f"{name} is not valid YAML: {e}")
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d.get("kind"), []).append(d)
    ds = (by_kind.get("DaemonSet") or [None])[0]
    cm = (by_kind.get("ConfigMap") or [None])[0]
    if ds is None or cm is None:
        fail("a DaemonSet and a ConfigMap are needed")
    if ds.get("apiVersion") != "apps/v1":
        fail("the DaemonSet's apiVersion must be apps/v1")
    spec = ds["spec"]
    tmpl = spec["template"]
    labels = tmpl["metadata"]["labels"]
    for k, v in spec["selector"]["matchLabels"].items():
        if labels.get(k) != v:
            fail(f"selector {k}={v} does not select the pod template")
    pod = tmpl["spec"]
    if pod.get("hostNetwork") is not True:
        fail("hostNetwork must be true: roce-route works on the node's routing tables")
    if not pod.get("nodeSelector"):
        fail("a nodeSelector for the GPU nodes is needed")
    volumes = {v["name"]: v for v in pod["volumes"]}
    if volumes.get("config", {}).get("configMap", {}).get("name") != cm["metadata"]["name"]:
        fail("the config volume must be the ConfigMap")
    commands = {}
    for c in pod.get("initContainers", []) + pod["containers"]:
        if not c.get("securityContext", {}).get("privileged"):
            fail(f"container {c['name']} must be privileged (routes, rules, /proc/sys/net)")
        for m in c.get("volumeMounts", []):
            if m["name"] not in volumes:
                fail(f"container {c['name']} mounts an unknown volume {m['name']}")
        if not any(m["mountPath"] == "/etc/roce-route" for m in c.get("volumeMounts", [])):
            fail(f"container {c['name']} does not mount the config at /etc/roce-route")
        commands[c["name"]] = c["command"]
    if commands.get("watch") != ["/usr/sbin/roce-route", "watch"]:
        fail("the main container must run `roce-route watch`")
    if cm["metadata"].get("namespace") != ds["metadata"].get("namespace"):
        fail("the ConfigMap and the DaemonSet must be in one namespace")
    if not any(k.endswith(".toml") for k in cm["data"]):
        fail("the ConfigMap holds no *.toml file")
    print(json.dumps(commands))


if __name__ == "__main__":
    main()
