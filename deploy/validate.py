#!/usr/bin/env python3
"""Checks of deploy/ that no off-the-shelf validator makes; called by deploy/validate.sh.

Sub-commands (each exits 1 with a message on the first problem class it finds):
  render DIR                 render a kustomization with the small built-in renderer (the
                             fallback when neither kubectl nor kustomize is installed)
  same A B                   two renders hold the same objects (built-in renderer vs kustomize)
  kustomizations ROOT        every kustomization names existing files, and every manifest file
                             beside one is used by it
  policy BASE PRODUCTION     hardening, probes, secrets, scaling rules on the rendered output
  otel FILE CONFIGMAP        the collector example is coherent and toolrouter points at it
  dashboard FILE             the Grafana dashboard parses and uses only toolrouter's metrics
  dockerfile FILE IGNORE TOML  structure of the image build (multi-stage, non-root, ports...)
  stubs SCRIPT               deploy/cargo-stubs.sh makes a placeholder for every cargo target
Only the standard library and PyYAML are used.
"""

import copy
import fnmatch
import json
import os
import re
import subprocess
import sys
import tempfile

import yaml


class Fail(Exception):
    pass


def load_all(path):
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def load_stream(text):
    return [d for d in yaml.safe_load_all(text) if d is not None]


def key_of(obj):
    md = obj.get("metadata") or {}
    return (obj.get("apiVersion"), obj.get("kind"), md.get("namespace"), md.get("name"))


# --------------------------------------------------------------------------------------------
# A small kustomize: resources, namespace, images, replicas, patches (strategic merge or
# JSON 6902). Anything else is refused rather than silently ignored.

SUPPORTED = {"apiVersion", "kind", "resources", "namespace", "images", "replicas", "patches",
             "patchesStrategicMerge"}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition",
                  "PersistentVolume", "StorageClass", "PriorityClass", "IngressClass",
                  "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"}
# Strategic-merge keys of the lists that these manifests patch (from the Kubernetes API types).
MERGE_KEYS = {"containers": "name", "initContainers": "name", "ephemeralContainers": "name",
              "env": "name", "volumes": "name", "volumeMounts": "mountPath",
              "imagePullSecrets": "name", "topologySpreadConstraints": "topologyKey"}
PORT_KEYS = {"containerPort", "port"}


def merge_key(field, items):
    if field in MERGE_KEYS:
        return MERGE_KEYS[field]
    if field == "ports" and items and isinstance(items[0], dict):
        return "containerPort" if "containerPort" in items[0] else "port"
    return None


def smp(base, patch, field=None):
    """Strategic merge patch of plain data (no $patch directives)."""
    if isinstance(patch, dict) and isinstance(base, dict):
        out = dict(base)
        for k, v in patch.items():
            if k.startswith("$"):
                raise Fail(f"strategic merge directive {k} is not supported by the built-in renderer")
            if v is None:
                out.pop(k, None)
            elif k in out:
                out[k] = smp(out[k], v, k)
            else:
                out[k] = copy.deepcopy(v)
        return out
    if isinstance(patch, list) and isinstance(base, list):
        mk = merge_key(field, base or patch)
        if mk is None:
            return copy.deepcopy(patch)
        out = [copy.deepcopy(b) for b in base]
        index = {b.get(mk): i for i, b in enumerate(out) if isinstance(b, dict)}
        new = []
        for p in patch:
            if p.get(mk) in index:
                i = index[p[mk]]
                out[i] = smp(out[i], p, None)
            else:
                new.append(copy.deepcopy(p))
        return new + out
    return copy.deepcopy(patch)


def json6902(doc, ops):
    def walk(path):
        parts = [p.replace("~1", "/").replace("~0", "~") for p in path.lstrip("/").split("/")]
        parent = doc
        for p in parts[:-1]:
            parent = parent[int(p)] if isinstance(parent, list) else parent[p]
        return parent, parts[-1]

    for op in ops:
        parent, last = walk(op["path"])
        kind = op["op"]
        if isinstance(parent, list):
            idx = len(parent) if last == "-" else int(last)
            if kind == "add":
                parent.insert(idx, copy.deepcopy(op["value"]))
            elif kind == "replace":
                parent[idx] = copy.deepcopy(op["value"])
            elif kind == "remove":
                del parent[idx]
            else:
                raise Fail(f"JSON patch op {kind} is not supported by the built-in renderer")
        else:
            if kind in ("add", "replace"):
                parent[last] = copy.deepcopy(op["value"])
            elif kind == "remove":
                del parent[last]
            else:
                raise Fail(f"JSON patch op {kind} is not supported by the built-in renderer")
    return doc


def matches(obj, target):
    md = obj.get("metadata") or {}
    group_version = obj.get("apiVersion", "")
    group, _, version = group_version.rpartition("/")
    checks = {"kind": obj.get("kind"), "name": md.get("name"), "namespace": md.get("namespace"),
              "group": group, "version": version}
    for k, v in target.items():
        if k in ("labelSelector", "annotationSelector"):
            raise Fail(f"patch target {k} is not supported by the built-in renderer")
        if k in checks and not re.fullmatch(str(v), checks[k] or ""):
            return False
    return True


def render(directory):
    kpath = None
    for name in ("kustomization.yaml", "kustomization.yml", "Kustomization"):
        if os.path.exists(os.path.join(directory, name)):
            kpath = os.path.join(directory, name)
    if kpath is None:
        raise Fail(f"{directory}: no kustomization file")
    (k,) = load_all(kpath)
    unknown = set(k) - SUPPORTED
    if unknown:
        raise Fail(f"{kpath}: fields {sorted(unknown)} are not supported by the built-in renderer")
    objs = []
    for r in k.get("resources", []):
        p = os.path.normpath(os.path.join(directory, r))
        objs.extend(render(p) if os.path.isdir(p) else load_all(p))
    patches = [{"path": p} for p in k.get("patchesStrategicMerge", [])] + list(k.get("patches", []))
    for spec in patches:
        if "path" in spec:
            docs = load_all(os.path.join(directory, spec["path"]))
        else:
            docs = load_stream(spec["patch"])
        target = spec.get("target")
        if len(docs) == 1 and isinstance(docs[0], list):
            if not target:
                raise Fail(f"{kpath}: a JSON 6902 patch needs a target")
            objs = [json6902(copy.deepcopy(o), docs[0]) if matches(o, target) else o for o in objs]
            continue
        for d in docs:
            hit = False
            for i, o in enumerate(objs):
                t = target or {"kind": d.get("kind"), "name": (d.get("metadata") or {}).get("name")}
                if matches(o, t):
                    patch = copy.deepcopy(d)
                    if target:
                        patch.pop("metadata", None)
                    objs[i] = smp(o, patch)
                    hit = True
            if not hit:
                raise Fail(f"{kpath}: patch {spec} matches no resource")
    ns = k.get("namespace")
    if ns:
        for o in objs:
            if o.get("kind") in CLUSTER_SCOPED:
                if o.get("kind") == "Namespace":
                    o["metadata"]["name"] = ns
                continue
            o.setdefault("metadata", {})["namespace"] = ns
    for rep in k.get("replicas", []):
        for o in objs:
            if o.get("kind") in ("Deployment", "StatefulSet", "ReplicaSet") and o["metadata"]["name"] == rep["name"]:
                o["spec"]["replicas"] = rep["count"]
    for img in k.get("images", []):
        for o in objs:
            pod = ((o.get("spec") or {}).get("template") or {}).get("spec") or {}
            for c in pod.get("containers", []) + pod.get("initContainers", []):
                m = re.fullmatch(r"([^@]+?)(?::([^:/@]+))?(?:@(.+))?", c.get("image", ""))
                if not m or m.group(1) != img["name"]:
                    continue
                name = img.get("newName", m.group(1))
                if "digest" in img:
                    c["image"] = f"{name}@{img['digest']}"
                else:
                    tag = img.get("newTag", m.group(2))
                    c["image"] = name + (f":{tag}" if tag else "") + (f"@{m.group(3)}" if m.group(3) and "newTag" not in img else "")
    return objs


def normalize(x, field=None):
    """Order-insensitive form for comparing renders: maps sorted, keyed lists sorted by key."""
    if isinstance(x, dict):
        return {k: normalize(v, k) for k, v in sorted(x.items())}
    if isinstance(x, list):
        items = [normalize(v) for v in x]
        mk = merge_key(field, x)
        if mk and all(isinstance(v, dict) for v in x):
            return sorted(items, key=lambda v: json.dumps(v.get(mk), sort_keys=True))
        return items
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return x
    return x


def cmd_same(a, b):
    da = {key_of(o): normalize(o) for o in load_all(a)}
    db = {key_of(o): normalize(o) for o in load_all(b)}
    if set(da) != set(db):
        raise Fail(f"{a} and {b} hold different objects: {sorted(map(str, set(da) ^ set(db)))}")
    for k in da:
        if da[k] != db[k]:
            raise Fail(f"{a} and {b} differ on {k}:\n{json.dumps(da[k], indent=1)}\n---\n{json.dumps(db[k], indent=1)}")


# --------------------------------------------------------------------------------------------

def cmd_kustomizations(root):
    found = 0
    for dirpath, _, files in os.walk(root):
        if "kustomization.yaml" not in files:
            continue
        found += 1
        kpath = os.path.join(dirpath, "kustomization.yaml")
        (k,) = load_all(kpath)
        if k.get("kind") != "Kustomization" or not str(k.get("apiVersion", "")).startswith("kustomize.config.k8s.io/"):
            raise Fail(f"{kpath}: not a Kustomization")
        used = set()
        refs = list(k.get("resources", [])) + list(k.get("patchesStrategicMerge", []))
        refs += [p["path"] for p in k.get("patches", []) if "path" in p]
        for r in refs:
            p = os.path.normpath(os.path.join(dirpath, r))
            if os.path.isdir(p):
                if not os.path.exists(os.path.join(p, "kustomization.yaml")):
                    raise Fail(f"{kpath}: {r} is a directory without kustomization.yaml")
            elif not os.path.isfile(p):
                raise Fail(f"{kpath}: {r} does not exist")
            else:
                used.add(os.path.abspath(p))
        for f in files:
            if f.endswith((".yaml", ".yml")) and f != "kustomization.yaml":
                if os.path.abspath(os.path.join(dirpath, f)) not in used:
                    raise Fail(f"{os.path.join(dirpath, f)} is not listed in {kpath}")
    if found == 0:
        raise Fail(f"no kustomization under {root}")
    print(f"{found} kustomizations list existing files, and only those")


# --------------------------------------------------------------------------------------------

def by_kind(objs, kind, name=None):
    out = [o for o in objs if o.get("kind") == kind and (name is None or o["metadata"]["name"] == name)]
    return out


def one(objs, kind, name):
    found = by_kind(objs, kind, name)
    if len(found) != 1:
        raise Fail(f"expected one {kind}/{name}, found {len(found)}")
    return found[0]


def need(cond, msg):
    if not cond:
        raise Fail(msg)


def selects(selector, labels):
    return all(labels.get(k) == v for k, v in (selector or {}).items())


def check_app(objs, where, min_replicas):
    dep = one(objs, "Deployment", "toolrouter")
    spec = dep["spec"]
    pod_meta = spec["template"]["metadata"]
    pod = spec["template"]["spec"]
    labels = pod_meta.get("labels", {})
    need(selects(spec["selector"]["matchLabels"], labels), f"{where}: Deployment selector does not match its pods")
    need(spec.get("replicas", 1) >= min_replicas, f"{where}: replicas {spec.get('replicas')} < {min_replicas}")

    ann = pod_meta.get("annotations", {})
    need(ann.get("prometheus.io/scrape") == "true" and ann.get("prometheus.io/port") == "8080"
         and ann.get("prometheus.io/path") == "/metrics", f"{where}: prometheus scrape annotations missing")

    psc = pod.get("securityContext", {})
    need(psc.get("runAsNonRoot") is True, f"{where}: pod runAsNonRoot")
    need(isinstance(psc.get("runAsUser"), int) and psc["runAsUser"] > 0, f"{where}: pod runAsUser must be a non-zero number")
    need((psc.get("seccompProfile") or {}).get("type") == "RuntimeDefault", f"{where}: seccompProfile RuntimeDefault")
    need(pod.get("automountServiceAccountToken") is False, f"{where}: service account token must not be mounted")
    sa = pod.get("serviceAccountName")
    need(sa and by_kind(objs, "ServiceAccount", sa), f"{where}: ServiceAccount {sa} missing")

    keys = {t["topologyKey"] for t in pod.get("topologySpreadConstraints", [])}
    need({"topology.kubernetes.io/zone", "kubernetes.io/hostname"} <= keys, f"{where}: topology spread on zone and hostname")
    for t in pod.get("topologySpreadConstraints", []):
        need(selects(t["labelSelector"]["matchLabels"], labels), f"{where}: topology spread selector does not match the pods")

    (c,) = [c for c in pod["containers"] if c["name"] == "toolrouter"]
    csc = c.get("securityContext", {})
    need(csc.get("readOnlyRootFilesystem") is True, f"{where}: readOnlyRootFilesystem")
    need(csc.get("allowPrivilegeEscalation") is False, f"{where}: allowPrivilegeEscalation false")
    need("ALL" in (csc.get("capabilities") or {}).get("drop", []), f"{where}: capabilities drop ALL")
    need(csc.get("runAsNonRoot", psc.get("runAsNonRoot")) is True, f"{where}: container runAsNonRoot")

    ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
    need(ports.get("grpc") == 50051 and ports.get("http") == 8080, f"{where}: container ports grpc 50051, http 8080")
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        need(probe in c, f"{where}: {probe} missing")
    # With TLS (TOOLROUTER_TLS_CERT set) Kubernetes gRPC probes cannot connect: every probe is
    # then an HTTPS GET on the http port, liveness on /healthz.
    tls = any(e.get("name") == "TOOLROUTER_TLS_CERT" for e in c.get("env", []))
    if tls:
        need((c["livenessProbe"].get("httpGet") or {}).get("path") == "/healthz",
             f"{where}: with TLS, liveness must be GET /healthz over HTTPS (gRPC probes cannot use TLS)")
    else:
        need((c["livenessProbe"].get("grpc") or {}).get("port") == 50051, f"{where}: liveness must be the gRPC health probe on 50051")
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        p = c[probe]
        handlers = [h for h in ("grpc", "httpGet", "tcpSocket", "exec") if h in p]
        need(len(handlers) == 1, f"{where}: {probe} must have exactly one handler, has {handlers}")
        if "grpc" in p:
            need(not tls, f"{where}: {probe} is a gRPC probe, which cannot use TLS")
            need(p["grpc"]["port"] == 50051, f"{where}: {probe} grpc port")
        if "httpGet" in p:
            need(p["httpGet"]["port"] in ("http", 8080) and p["httpGet"]["path"] in ("/readyz", "/healthz"),
                 f"{where}: {probe} must ask /readyz or /healthz on the http port")
            need(p["httpGet"].get("scheme", "HTTP") == ("HTTPS" if tls else "HTTP"),
                 f"{where}: {probe} scheme must be {'HTTPS' if tls else 'HTTP'}")
    need(ann.get("prometheus.io/scheme", "http") == ("https" if tls else "http"),
         f"{where}: prometheus.io/scheme annotation must be {'https' if tls else 'http'}")

    res = c.get("resources", {})
    for kind in ("requests", "limits"):
        need({"cpu", "memory"} <= set(res.get(kind, {})), f"{where}: resources.{kind} cpu and memory")

    pre = ((c.get("lifecycle") or {}).get("preStop") or {})
    need(pre, f"{where}: preStop hook missing")
    pre_s = (pre.get("sleep") or {}).get("seconds", 0)
    app_grace = 20
    need(pod.get("terminationGracePeriodSeconds", 30) > pre_s + app_grace,
         f"{where}: terminationGracePeriodSeconds must exceed preStop ({pre_s}s) + the app's grace ({app_grace}s)")

    # Environment: store from the Secret, API keys file from the mounted Secret, 0.0.0.0.
    env = c.get("env", [])
    names = {}
    cm_names = [e["configMapRef"]["name"] for e in c.get("envFrom", []) if "configMapRef" in e]
    defined = set()
    for name in cm_names:
        cm = one(objs, "ConfigMap", name)
        defined |= set(cm.get("data", {}))
        data = cm.get("data", {})
        need(data.get("TOOLROUTER_GRPC_ADDR") == "0.0.0.0:50051" and data.get("TOOLROUTER_HTTP_ADDR") == "0.0.0.0:8080",
             f"{where}: ConfigMap {name} must listen on 0.0.0.0:50051 and 0.0.0.0:8080")
    for e in env:
        for ref in re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", e.get("value", "")):
            need(ref in defined, f"{where}: env {e['name']} uses $({ref}) before it is defined (order matters)")
        defined.add(e["name"])
        names[e["name"]] = e
    store = ((names.get("TOOLROUTER_STORE") or {}).get("valueFrom") or {}).get("secretKeyRef") or {}
    need(store.get("name") == "toolrouter-postgres" and store.get("key") == "url",
         f"{where}: TOOLROUTER_STORE must come from Secret toolrouter-postgres key url")
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
    keys_path = (names.get("TOOLROUTER_API_KEYS") or {}).get("value", "")
    keys_mount = [m for p, m in mounts.items() if keys_path.startswith(p.rstrip("/") + "/")]
    need(keys_mount and (vols[keys_mount[0]["name"]].get("secret") or {}).get("secretName") == "toolrouter-api-keys",
         f"{where}: TOOLROUTER_API_KEYS must be a file of the mounted Secret toolrouter-api-keys")
    if tls:
        for var in ("TOOLROUTER_TLS_CERT", "TOOLROUTER_TLS_KEY"):
            path = (names.get(var) or {}).get("value", "")
            mount = [m for p, m in mounts.items() if path.startswith(p.rstrip("/") + "/")]
            need(mount and (vols[mount[0]["name"]].get("secret") or {}).get("secretName") == "toolrouter-tls"
                 and "subPath" not in mount[0],
                 f"{where}: {var} must be a file of the Secret toolrouter-tls, mounted without subPath (renewals reach the pod)")
    for path in ("/tmp", "/var/lib/toolrouter"):
        need(path in mounts and "emptyDir" in vols[mounts[path]["name"]], f"{where}: {path} must be an emptyDir")

    # Service, HPA, PDB, NetworkPolicy.
    svc = one(objs, "Service", "toolrouter")
    need(selects(svc["spec"]["selector"], labels), f"{where}: Service selector does not match the pods")
    sports = {p["name"]: p for p in svc["spec"]["ports"]}
    need(sports.get("grpc", {}).get("port") == 50051 and sports["grpc"].get("appProtocol") == ("https" if tls else "grpc"),
         f"{where}: Service port grpc 50051 with appProtocol {'https (TLS)' if tls else 'grpc'}")
    need(sports.get("http", {}).get("port") == 8080, f"{where}: Service port http 8080")
    if tls:
        for service in by_kind(objs, "Service"):
            for p in service["spec"]["ports"]:
                need(p.get("appProtocol") == "https",
                     f"{where}: Service {service['metadata']['name']} port {p['name']} carries TLS: appProtocol https")
    for p in svc["spec"]["ports"]:
        need(p["targetPort"] in ports or p["targetPort"] in ports.values(), f"{where}: Service targetPort {p['targetPort']} unknown")

    hpa = one(objs, "HorizontalPodAutoscaler", "toolrouter")
    need(hpa["apiVersion"] == "autoscaling/v2", f"{where}: HPA must be autoscaling/v2")
    ref = hpa["spec"]["scaleTargetRef"]
    need(ref["kind"] == "Deployment" and ref["name"] == "toolrouter", f"{where}: HPA must scale the Deployment")
    need(hpa["spec"]["minReplicas"] >= min_replicas and hpa["spec"]["maxReplicas"] >= hpa["spec"]["minReplicas"],
         f"{where}: HPA min/max replicas")
    need(spec.get("replicas", 1) >= hpa["spec"]["minReplicas"], f"{where}: Deployment replicas below HPA minReplicas")
    need(any(m.get("resource", {}).get("name") == "cpu" for m in hpa["spec"]["metrics"]), f"{where}: HPA on CPU")

    pdb = one(objs, "PodDisruptionBudget", "toolrouter")
    need(pdb["apiVersion"] == "policy/v1", f"{where}: PDB must be policy/v1")
    need(selects(pdb["spec"]["selector"]["matchLabels"], labels), f"{where}: PDB selector does not match the pods")

    np = one(objs, "NetworkPolicy", "toolrouter")
    need(selects(np["spec"]["podSelector"]["matchLabels"], labels), f"{where}: NetworkPolicy does not select the pods")
    need(set(np["spec"].get("policyTypes", [])) == {"Ingress", "Egress"}, f"{where}: NetworkPolicy must restrict ingress and egress")
    in_ports = {p["port"] for r in np["spec"]["ingress"] for p in r.get("ports", [])}
    need({50051, 8080} <= in_ports, f"{where}: NetworkPolicy ingress must open 50051 and 8080")
    out_ports = {p["port"] for r in np["spec"]["egress"] for p in r.get("ports", [])}
    need({53, 5432, 4317} <= out_ports, f"{where}: NetworkPolicy egress must allow DNS, PostgreSQL and OTLP")
    return dep, hpa, tls


def cmd_policy(base_file, prod_file):
    base = load_all(base_file)
    prod = load_all(prod_file)
    check_app(base, "base", 2)
    dep, hpa, tls = check_app(prod, "production", 3)
    need(tls, "production: TLS on both listeners (TOOLROUTER_TLS_CERT, TOOLROUTER_TLS_KEY from the Secret toolrouter-tls)")
    need(dep["spec"]["replicas"] == 3, "production: 3 replicas")
    need(hpa["spec"]["minReplicas"] >= 3, "production: HPA minReplicas >= 3")
    (c,) = [c for c in dep["spec"]["template"]["spec"]["containers"] if c["name"] == "toolrouter"]
    need(not c["image"].endswith(":latest") and ":" in c["image"].rsplit("/", 1)[-1], "production: image must have a pinned tag")
    for o in prod:
        if o["kind"] == "Namespace":
            need(o["metadata"]["labels"].get("pod-security.kubernetes.io/enforce") == "restricted",
                 "production: namespace must enforce the restricted Pod Security Standard")
        else:
            need(o["metadata"].get("namespace") == "toolrouter", f"production: {o['kind']}/{o['metadata']['name']} not in namespace toolrouter")
    print("base and production renders meet the deployment rules (security, probes, TLS, secrets, scaling, network)")


# --------------------------------------------------------------------------------------------

def cmd_otel(path, app_configmap):
    objs = load_all(path)
    kinds = sorted(o["kind"] for o in objs)
    need(kinds == ["ConfigMap", "Deployment", "Service"], f"{path}: expected a ConfigMap, a Deployment and a Service, got {kinds}")
    cm = by_kind(objs, "ConfigMap")[0]
    dep = by_kind(objs, "Deployment")[0]
    svc = by_kind(objs, "Service")[0]
    ((fname, text),) = cm["data"].items()
    cfg = yaml.safe_load(text)
    for section in ("receivers", "processors", "exporters", "service"):
        need(section in cfg, f"{path}: collector config has no {section}")
    exts = cfg.get("extensions", {})
    for e in cfg["service"].get("extensions", []):
        need(e in exts, f"{path}: service uses undefined extension {e}")
    used = {"receivers": set(), "processors": set(), "exporters": set()}
    for name, pipe in cfg["service"]["pipelines"].items():
        need(name.split("/")[0] in ("traces", "metrics", "logs"), f"{path}: pipeline {name}")
        for section in used:
            for comp in pipe.get(section, []):
                need(comp in cfg[section], f"{path}: pipeline {name} uses undefined {section[:-1]} {comp}")
                used[section].add(comp)
        need(pipe.get("receivers") and pipe.get("exporters"), f"{path}: pipeline {name} needs receivers and exporters")
    for section, names in used.items():
        unused = set(cfg[section]) - names
        need(not unused, f"{path}: {section} {sorted(unused)} defined but in no pipeline")
    need(cfg["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"].endswith(":4317"), f"{path}: OTLP gRPC receiver on 4317")
    need("batch" in cfg["processors"], f"{path}: batch processor")
    need("traces" in cfg["service"]["pipelines"], f"{path}: a traces pipeline")
    scrapes = cfg["receivers"]["prometheus"]["config"]["scrape_configs"]
    need(any(s.get("metrics_path", "/metrics") == "/metrics" and any(
        sd.get("port") == 8080 for sd in s.get("dns_sd_configs", [])) or any(
        t.endswith(":8080") for sc in s.get("static_configs", []) for t in sc.get("targets", [])) for s in scrapes),
        f"{path}: Prometheus scrape of toolrouter's /metrics on 8080")
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    mount_paths = {m["name"]: m["mountPath"] for m in c.get("volumeMounts", [])}
    for s in scrapes:
        if s.get("scheme") == "https":
            ca = (s.get("tls_config") or {}).get("ca_file", "")
            need(ca and any(ca.startswith(p.rstrip("/") + "/") for p in mount_paths.values()),
                 f"{path}: scrape job {s.get('job_name')} verifies TLS with {ca!r}, which no volume provides")
    vol = [v for v in dep["spec"]["template"]["spec"]["volumes"] if (v.get("configMap") or {}).get("name") == cm["metadata"]["name"]]
    need(vol, f"{path}: the Deployment does not mount the ConfigMap")
    cfg_path = mount_paths[vol[0]["name"]].rstrip("/") + "/" + fname
    need(f"--config={cfg_path}" in c.get("args", []), f"{path}: collector not started with --config={cfg_path}")
    need(selects(svc["spec"]["selector"], dep["spec"]["template"]["metadata"]["labels"]), f"{path}: Service selector")
    need(any(p["port"] == 4317 for p in svc["spec"]["ports"]), f"{path}: Service port 4317")
    for ref in re.findall(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}", text):
        need(any(e["name"] == ref for e in c.get("env", [])), f"{path}: collector config uses ${{env:{ref}}}, not set")
    (app_cm,) = load_all(app_configmap)
    endpoint = app_cm["data"].get("OTEL_EXPORTER_OTLP_ENDPOINT", "")
    need(endpoint == f"http://{svc['metadata']['name']}:4317", f"{app_configmap}: OTEL_EXPORTER_OTLP_ENDPOINT {endpoint!r} "
         f"is not the collector's service http://{svc['metadata']['name']}:4317")
    print("collector: pipelines use only defined components, OTLP 4317, scrape of /metrics, toolrouter points at it")


# --------------------------------------------------------------------------------------------

METRICS = {
    "toolrouter_grpc_requests_total": ("counter", {"method", "code"}),
    "toolrouter_grpc_request_duration_seconds": ("histogram", {"method"}),
    "toolrouter_tool_calls_total": ("counter", {"outcome"}),
    "toolrouter_tool_call_duration_seconds": ("histogram", {"outcome"}),
    "toolrouter_executor_duration_seconds": ("histogram", {"kind"}),
    "toolrouter_search_duration_seconds": ("histogram", set()),
    "toolrouter_search_zero_results_total": ("counter", set()),
    "toolrouter_deferred_pending": ("gauge", set()),
    "toolrouter_store_duration_seconds": ("histogram", {"op"}),
}
SCRAPE_LABELS = {"job", "instance"}
OUTCOMES = {"result", "error", "deferred", "uncertain"}


def metric_base(name):
    if name in METRICS:
        return name
    for suffix in ("_bucket", "_count", "_sum"):
        if name.endswith(suffix) and METRICS.get(name[: -len(suffix)], ("",))[0] == "histogram":
            return name[: -len(suffix)]
    return None


def walk_panels(panels):
    for p in panels:
        yield p
        yield from walk_panels(p.get("panels", []))


def cmd_dashboard(path):
    with open(path, encoding="utf-8") as f:
        d = json.load(f)
    need(isinstance(d.get("schemaVersion"), int) and 36 <= d["schemaVersion"] <= 41, f"{path}: schemaVersion {d.get('schemaVersion')}")
    need(d.get("uid") and d.get("title"), f"{path}: uid and title")
    tmpl = {v["name"]: v for v in d.get("templating", {}).get("list", [])}
    ds = tmpl.get("datasource")
    need(ds and ds["type"] == "datasource" and ds["query"] == "prometheus", f"{path}: a Prometheus datasource variable named datasource")
    exprs = []
    for v in tmpl.values():
        if v["type"] == "query":
            need(v["datasource"]["uid"] == "${datasource}", f"{path}: variable {v['name']} must use ${{datasource}}")
            q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            exprs.append((f"variable {v['name']}", q))
    ids = set()
    cells = set()
    for p in walk_panels(d.get("panels", [])):
        need(p["id"] not in ids, f"{path}: duplicate panel id {p['id']}")
        ids.add(p["id"])
        g = p["gridPos"]
        need(g["x"] + g["w"] <= 24, f"{path}: panel {p['title']!r} wider than the grid")
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                need((x, y) not in cells, f"{path}: panel {p['title']!r} overlaps another")
                cells.add((x, y))
        if p["type"] == "row":
            continue
        need(p.get("datasource", {}).get("uid") == "${datasource}", f"{path}: panel {p['title']!r} must use ${{datasource}}")
        need(p.get("targets"), f"{path}: panel {p['title']!r} has no query")
        for t in p["targets"]:
            need(t.get("datasource", {}).get("uid") == "${datasource}", f"{path}: panel {p['title']!r} target datasource")
            exprs.append((f"panel {p['title']!r}", t["expr"]))
    seen = set()
    quantiles = set()
    for where, e in exprs:
        names = re.findall(r"\b(toolrouter_[A-Za-z0-9_]+)\b", e)
        need(names, f"{path}: {where}: query names no toolrouter metric: {e}")
        for n in names:
            base = metric_base(n)
            need(base, f"{path}: {where}: unknown metric {n} (allowed: {sorted(METRICS)})")
            seen.add(base)
            kind, labels = METRICS[base]
            if kind == "histogram" and n == base:
                raise Fail(f"{path}: {where}: histogram {base} used without _bucket/_count/_sum")
            if kind == "counter" and where.startswith("panel"):
                need(re.search(rf"(rate|increase)\(\s*{n}\b", e), f"{path}: {where}: counter {n} must be used through rate()/increase()")
        allowed = SCRAPE_LABELS | {"le"} | set().union(*(METRICS[metric_base(n)][1] for n in names))
        for group in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", e):
            for label in filter(None, (x.strip() for x in group.split(","))):
                need(label in allowed, f"{path}: {where}: label {label} is not one of {sorted(allowed)}")
        for sel in re.findall(r"\{([^}]*)\}", e):
            for label, _, value in re.findall(r'([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"', sel):
                need(label in allowed, f"{path}: {where}: label {label} is not one of {sorted(allowed)}")
        for label_values in re.findall(r"label_values\([^,]*,\s*([A-Za-z_]+)\)", e):
            need(label_values in allowed, f"{path}: {where}: label_values of unknown label {label_values}")
        for qv, m in re.findall(r"histogram_quantile\(\s*([0-9.]+)\s*,.*?\b(toolrouter_\w+)", e):
            need(m.endswith("_bucket"), f"{path}: {where}: histogram_quantile over {m}, not a _bucket series")
            need(re.search(r"by\s*\([^)]*\ble\b", e), f"{path}: {where}: histogram_quantile must aggregate by le")
            quantiles.add((metric_base(m), float(qv)))
    missing = set(METRICS) - seen
    need(not missing, f"{path}: metrics without a panel: {sorted(missing)}")
    for m, (kind, _) in METRICS.items():
        if kind == "histogram":
            need({(m, 0.5), (m, 0.99)} <= quantiles, f"{path}: {m} needs p50 and p99 panels")
    print(f"dashboard: {len(ids)} panels, {len(exprs)} queries over the {len(METRICS)} toolrouter metrics only")


# --------------------------------------------------------------------------------------------

def dockerignore_excludes(patterns, path):
    excluded = False
    for p in patterns:
        neg = p.startswith("!")
        pat = p[1:] if neg else p
        pat = pat.strip("/")
        parts = path.split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        hit = any(fnmatch.fnmatch(pre, pat) or fnmatch.fnmatch(pre, pat.replace("**/", "")) for pre in prefixes)
        if hit:
            excluded = not neg
    return excluded


def cmd_dockerfile(path, ignore_path, cargo_toml):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    lines = []
    for raw in re.sub(r"\\\n", " ", text).splitlines():
        s = raw.strip()
        if s and not s.startswith("#"):
            lines.append(s)
    stages = []
    args = {}
    for s in lines:
        instr, _, rest = s.partition(" ")
        instr = instr.upper()
        if instr == "ARG" and not stages:
            k, _, v = rest.partition("=")
            args[k.strip()] = v.strip()
        if instr == "FROM":
            stages.append({"from": rest, "lines": []})
        elif stages:
            stages[-1]["lines"].append((instr, rest))
    need(len(stages) >= 2, f"{path}: must be a multi-stage build")
    builder = stages[0]["from"]
    m = re.match(r"rust:(\S+?)-", builder.replace("${RUST_VERSION}", args.get("RUST_VERSION", "")))
    need(m, f"{path}: the first stage must build on a rust image, got {builder}")
    with open(cargo_toml, encoding="utf-8") as f:
        msrv = re.search(r'^rust-version\s*=\s*"([0-9.]+)"', f.read(), re.M)
    if msrv:
        have = tuple(int(x) for x in m.group(1).split("."))
        want = tuple(int(x) for x in msrv.group(1).split("."))
        need(have[: len(want)] >= want, f"{path}: rust {m.group(1)} is older than Cargo.toml's rust-version {msrv.group(1)}")
    final = stages[-1]
    need(re.match(r"(gcr\.io/distroless/cc-debian\d+|debian:\S+-slim)", final["from"]), f"{path}: runtime must be distroless/cc or debian-slim")
    instrs = final["lines"]
    users = [r for i, r in instrs if i == "USER"]
    need(users, f"{path}: the runtime stage must set USER")
    uid = users[-1].split(":")[0]
    need(uid.isdigit() and int(uid) != 0, f"{path}: USER must be a numeric non-root uid, got {users[-1]}")
    exposed = " ".join(r for i, r in instrs if i == "EXPOSE").split()
    need({"50051", "8080"} <= set(exposed), f"{path}: EXPOSE 50051 8080")
    entry = [r for i, r in instrs if i == "ENTRYPOINT"]
    need(entry and json.loads(entry[-1])[-1] == "serve" and json.loads(entry[-1])[0].endswith("toolrouter"),
         f"{path}: ENTRYPOINT must be the exec form of `toolrouter serve`")
    envs = " ".join(r for i, r in instrs if i == "ENV")
    need("TOOLROUTER_GRPC_ADDR=0.0.0.0:50051" in envs and "TOOLROUTER_HTTP_ADDR=0.0.0.0:8080" in envs, f"{path}: ENV for 0.0.0.0 listeners")
    need(any(i == "VOLUME" for i, _ in instrs), f"{path}: a VOLUME for the embedded store")
    builds = [r for st in stages[:-1] for i, r in st["lines"] if i == "RUN" and "cargo build" in r]
    need(builds and all("--locked" in b and "--release" in b for b in builds), f"{path}: cargo build --release --locked")
    need(len(builds) >= 2, f"{path}: a dependency build before the sources are copied (layer cache)")
    with open(ignore_path, encoding="utf-8") as f:
        patterns = [p.strip() for p in f if p.strip() and not p.startswith("#")]
    for p in ("target", ".git"):
        need(dockerignore_excludes(patterns, p), f"{ignore_path}: must exclude {p}")
    for st in stages:
        for i, r in st["lines"]:
            if i == "COPY" and "--from=" not in r:
                srcs = [w for w in r.split() if not w.startswith("--")][:-1]
                for s in srcs:
                    if s != ".":
                        need(not dockerignore_excludes(patterns, s), f"{ignore_path}: excludes {s}, which {path} copies")
                        need(os.path.exists(s), f"{path}: copies {s}, which does not exist")
    print(f"Dockerfile: {len(stages)} stages, runtime {final['from']}, USER {users[-1]}, rust {m.group(1)} >= rust-version")


def cmd_stubs(script):
    manifest = """[package]
name = "x"
version = "0.1.0"
edition = "2024"
[lib]
path = "src/lib.rs"
[[bin]]
name = "x"
path = "src/main.rs"
[[bin]]
name = "tool"
[[bench]]
name = "discovery"
harness = false
[[test]]
name = "t"
path = "tests/sub/t.rs"
[dependencies]
"""
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "Cargo.toml"), "w") as f:
            f.write(manifest)
        os.makedirs(os.path.join(d, "src"))
        with open(os.path.join(d, "src/main.rs"), "w") as f:
            f.write("// real\n")
        subprocess.run(["sh", os.path.abspath(script)], cwd=d, check=True)
        for p in ("src/lib.rs", "src/main.rs", "src/bin/tool.rs", "benches/discovery.rs", "tests/sub/t.rs"):
            need(os.path.isfile(os.path.join(d, p)), f"{script}: no placeholder for {p}")
        with open(os.path.join(d, "src/main.rs")) as f:
            need(f.read() == "// real\n", f"{script}: overwrote an existing source")
    print("cargo-stubs.sh: placeholders for lib, bins, benches, tests; existing files kept")


def main(argv):
    cmd, args = argv[1], argv[2:]
    try:
        if cmd == "render":
            objs = render(args[0])
            sys.stdout.write(yaml.safe_dump_all(objs, sort_keys=False))
        elif cmd == "same":
            cmd_same(*args)
        elif cmd == "kustomizations":
            cmd_kustomizations(*args)
        elif cmd == "policy":
            cmd_policy(*args)
        elif cmd == "otel":
            cmd_otel(*args)
        elif cmd == "dashboard":
            cmd_dashboard(*args)
        elif cmd == "dockerfile":
            cmd_dockerfile(*args)
        elif cmd == "stubs":
            cmd_stubs(*args)
        else:
            raise Fail(f"unknown command {cmd}")
    except Fail as e:
        print(f"FAIL: {e}", file=sys.stderr)
        return 1
    except (OSError, ValueError, KeyError, IndexError, TypeError, AttributeError, yaml.YAMLError) as e:
        # A file that does not parse, or lacks a field the checks need.
        print(f"FAIL: {cmd} {' '.join(args)}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
