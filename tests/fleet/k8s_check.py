#!/usr/bin/python3
"""Checks the objects `kubectl kustomize deploy/k8s` renders against the fleet design.

  k8s_check.py RENDERED.yaml OUT_DIR  < (symdexd --help, or nothing)

Asserts what a broken deployment would show: the replica count, a cache volume per replica
where the fleet cache is configured, native gRPC probes on the port symdexd listens on,
resource requests and limits, the unprivileged security context, an HPA on the StatefulSet
whose maximum the proxy knows, the proxy's consistent-hash directive in its ConfigMap, and
replica DNS names that match the headless service. Writes the proxy ConfigMap's files to
OUT_DIR (k8s_check.sh runs them through nginx). Every symdexd.conf key must be a symdexd flag
(`--key` in the help on stdin); the fleet flags may be missing only from a symdexd that
predates them (reported, not failed).
"""
import os
import re
import sys

import yaml

FLEET_KEYS = {"fleet-cache", "fleet-cache-max-bytes", "fetch-timeout", "fetch-max-bytes",
              "negative-cache-seconds"}
failures = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        failures.append(what)


def gib(q):
    m = re.fullmatch(r"(\d+)(Gi|Mi)", q or "")
    return int(m[1]) / (1 if m[2] == "Gi" else 1024) if m else 0


def main():
    docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
    out = sys.argv[2]
    helptext = sys.stdin.read()

    def one(kind, name):  # by name, or a generated ConfigMap's name-<hash>
        found = [d for d in docs if d["kind"] == kind
                 and re.fullmatch(re.escape(name) + r"(-[a-z0-9]{10})?", d["metadata"]["name"])]
        if len(found) != 1:
            print(f"FAIL  exactly one {kind} named {name}: found {len(found)}")
            sys.exit(1)
        return found[0]

    sts = one("StatefulSet", "symdexd")
    spec = sts["spec"]
    pod = spec["template"]["spec"]
    c = pod["containers"][0]
    check(spec["replicas"] == 3, f"StatefulSet symdexd: 3 replicas ({spec['replicas']})")
    check(c["image"] == "localhost/symdex:0.1.0", f"symdexd image from the kustomize images entry ({c['image']})")

    # The config: fleet keys, and the cache directory on the per-replica volume.
    cm_name = next(v["configMap"]["name"] for v in pod["volumes"] if "configMap" in v)
    conf_text = one("ConfigMap", "symdexd-config")["data"]["symdexd.conf"]
    check(cm_name.startswith("symdexd-config"), "symdexd mounts the symdexd-config ConfigMap")
    conf = {}
    for line in conf_text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            k, v = (s.strip() for s in line.split("=", 1))
            conf[k] = v
    check(FLEET_KEYS <= conf.keys(), f"symdexd.conf sets the fleet keys ({sorted(FLEET_KEYS - conf.keys()) or 'all'})")
    check(conf.get("index-live") == "false", "fleet replicas do not index their own node (index-live = false)")
    cfg_arg = c["command"][c["command"].index("--config") + 1]
    conf_mount = next(m["mountPath"] for m in c["volumeMounts"] if m["name"] == "config")
    check(os.path.dirname(cfg_arg) == conf_mount, f"--config {cfg_arg} is in the ConfigMap mount {conf_mount}")
    if helptext:
        flags = set(re.findall(r"--([a-z][a-z0-9-]*)", helptext))
        unknown = sorted(k for k in conf if k not in flags and k not in FLEET_KEYS)
        check(not unknown, f"every symdexd.conf key is a symdexd flag (unknown: {unknown or 'none'})")
        missing = sorted(k for k in FLEET_KEYS if k not in flags)
        if missing:
            print(f"note: this symdexd does not know {missing} yet (the fleet flags land separately)")

    vct = spec.get("volumeClaimTemplates") or []
    check(len(vct) == 1 and gib(vct[0]["spec"]["resources"]["requests"]["storage"]) >= 20,
          "one volumeClaimTemplate per replica, >= 20Gi")
    cache_mount = next((m["mountPath"] for m in c["volumeMounts"] if vct and m["name"] == vct[0]["metadata"]["name"]), None)
    check(cache_mount is not None and conf.get("fleet-cache", "").startswith(cache_mount + "/")
          and conf.get("db", "").startswith(cache_mount + "/"),
          f"fleet-cache and db live on the claim's volume ({cache_mount})")
    env = {e["name"]: e.get("value") for e in c.get("env", [])}
    check(env.get("DEBUGINFOD_CACHE_PATH", "").startswith(f"{cache_mount}/"), "debuginfod's client cache on the volume too")
    env_cm = [e["configMapRef"]["name"] for e in c.get("envFrom", [])]
    env_data = {}
    for d in docs:
        if d["kind"] == "ConfigMap" and d["metadata"]["name"] in env_cm:
            env_data.update(d["data"])
    check("DEBUGINFOD_URLS" in env_data, "DEBUGINFOD_URLS comes from a ConfigMap")

    grpc_port = next(p["containerPort"] for p in c["ports"] if p["name"] == "grpc")
    check(conf.get("listen", "").endswith(f":{grpc_port}"), f"symdexd listens on the container's grpc port {grpc_port}")
    for probe in ("readinessProbe", "livenessProbe"):
        check(c.get(probe, {}).get("grpc", {}).get("port") == grpc_port, f"{probe}: native gRPC probe on {grpc_port}")
    res = c.get("resources", {})
    check(2 <= gib(res.get("requests", {}).get("memory")) <= gib(res.get("limits", {}).get("memory")) <= 4
          and "cpu" in res.get("requests", {}),
          f"resources: cpu request, memory 2-4 GiB ({res})")
    sc = c.get("securityContext", {})
    check(pod.get("securityContext", {}).get("runAsNonRoot") is True and sc.get("readOnlyRootFilesystem") is True
          and sc.get("capabilities", {}).get("drop") == ["ALL"] and sc.get("allowPrivilegeEscalation") is False,
          "symdexd: runAsNonRoot, readOnlyRootFilesystem, no capabilities")

    svc = one("Service", "symdexd")
    labels = spec["template"]["metadata"]["labels"]
    check(svc["spec"].get("clusterIP") == "None" and spec["serviceName"] == svc["metadata"]["name"]
          and all(labels.get(k) == v for k, v in svc["spec"]["selector"].items()),
          "a headless Service governs the StatefulSet and selects its pods")

    hpa = one("HorizontalPodAutoscaler", "symdexd")
    h = hpa["spec"]
    check(hpa["apiVersion"] == "autoscaling/v2" and h["scaleTargetRef"]["kind"] == "StatefulSet"
          and h["scaleTargetRef"]["name"] == sts["metadata"]["name"]
          and any(m.get("resource", {}).get("name") == "cpu" for m in h["metrics"])
          and h["minReplicas"] == spec["replicas"],
          f"HPA autoscaling/v2 on CPU targets the StatefulSet, min {h['minReplicas']} max {h['maxReplicas']}")
    pdbs = [d for d in docs if d["kind"] == "PodDisruptionBudget"
            and all(labels.get(k) == v for k, v in d["spec"]["selector"]["matchLabels"].items())]
    check(len(pdbs) == 1, "a PodDisruptionBudget covers the replicas")

    # The proxy.
    dep = one("Deployment", "symdex-proxy")
    pc = dep["spec"]["template"]["spec"]["containers"][0]
    proxy_cm = one("ConfigMap", "symdex-proxy")
    files = proxy_cm["data"]
    nginx_conf = files.get("nginx.conf", "")
    check(re.search(r"^\s*hash \$http_symdex_build_id consistent;", nginx_conf, re.M) is not None,
          "the proxy ConfigMap's nginx.conf hashes on the symdex-build-id header, consistent")
    check("grpc_pass grpc://symdex;" in nginx_conf and "grpc_next_upstream " in nginx_conf,
          "the proxy passes gRPC to the upstream and retries on the next server")
    check(any(v.get("configMap", {}).get("name") == proxy_cm["metadata"]["name"]
              for v in dep["spec"]["template"]["spec"]["volumes"]), "the proxy mounts its ConfigMap")
    penv = {e["name"]: e.get("value") for e in pc.get("env", [])}
    check(penv.get("SYMDEX_REPLICA_NAME") == f"{sts['metadata']['name']}-%d.{svc['metadata']['name']}"
          and penv.get("SYMDEX_REPLICA_PORT") == str(grpc_port),
          f"the proxy finds replicas by their headless DNS names ({penv.get('SYMDEX_REPLICA_NAME')}:{penv.get('SYMDEX_REPLICA_PORT')})")
    check(penv.get("SYMDEX_MAX_REPLICAS") == str(h["maxReplicas"]),
          "the proxy lists as many replica names as the HPA may create")
    listen = re.search(r"^\s*listen (\d+) http2;", nginx_conf, re.M)
    pport = next(p["containerPort"] for p in pc["ports"] if p["name"] == "grpc")
    check(listen is not None and int(listen[1]) == pport and pc.get("readinessProbe", {}).get("grpc", {}).get("port") == pport,
          f"nginx listens (http2) on the proxy container's port {pport}, probed with gRPC")
    psc = pc.get("securityContext", {})
    check(psc.get("readOnlyRootFilesystem") is True and psc.get("capabilities", {}).get("drop") == ["ALL"],
          "proxy: readOnlyRootFilesystem, no capabilities")
    psvc = one("Service", "symdex")
    check(psvc["spec"]["ports"][0]["targetPort"] in ("grpc", pport), "the symdex Service reaches the proxy")

    os.makedirs(out, exist_ok=True)
    for name, text in files.items():
        with open(os.path.join(out, name), "w") as f:
            f.write(text)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
