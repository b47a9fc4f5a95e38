#!/usr/bin/env bash
# The Kubernetes examples (packaging/k8s/) parse (python3-yaml), and the
# fields that make them work are there: the DaemonSet's /models is a
# hostPath mounted with mountPropagation: Bidirectional by a privileged
# container with /dev/fuse, IPC_LOCK for memlock, probes on
# .seedfs/status, an unmount before stop; the engine reads the hostPath
# with HostToContainer, read only; the seed sidecar shares the engine's
# weights, is probed on /v1/health (which needs no token) and is behind a
# Service; tokens come from a Secret volume, defaultMode 0400 (seedfs
# refuses a secret its group or others may read).  The deployment is the
# secure one: the seed's control port speaks TLS (--tls-cert/--tls-key
# from a Secret, probed over HTTPS) and signs every manifest (--digest
# sha256 --sign-key from a Secret); the DaemonSet verifies the seeds
# against the CA (--tls-ca) and takes only manifests signed by the key
# (--trust-key), both from a mounted ConfigMap; each file an option
# names is one a volume's items put there.  Every seedfs command line in
# them uses only options that command takes.  No cluster exists here.
set -euo pipefail
SEEDFS=$(cd "$1" && pwd)/seedfs
K8S=$(cd "$(dirname "$0")/../packaging/k8s" && pwd)
/usr/bin/python3 - "$K8S" "$SEEDFS" <<'PY'
import glob, os, re, shlex, subprocess, sys
import yaml

k8s, seedfs = sys.argv[1], sys.argv[2]
docs = []
for f in sorted(glob.glob(os.path.join(k8s, "*.yaml"))):
    for d in yaml.safe_load_all(open(f)):
        assert isinstance(d, dict) and d.get("apiVersion") and d.get("kind"), f
        docs.append((os.path.basename(f), d))
assert len(docs) >= 4, [n for n, _ in docs]

def one(kind, name):
    m = [d for _, d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(m) == 1, (kind, name)
    return m[0]

def volume(spec, name):
    v = [v for v in spec["volumes"] if v["name"] == name]
    assert len(v) == 1, name
    return v[0]

def mount_of(c, path):
    m = [m for m in c.get("volumeMounts", []) if m["mountPath"] == path]
    assert len(m) == 1, (c["name"], path)
    return m[0]

def container(spec, name):
    c = [c for c in spec["containers"] if c["name"] == name]
    assert len(c) == 1, name
    return c[0]

def bound(key, op, limit, value):
    """Print the bound line tests/claims_bounds.py reads; assert it."""
    print("bound: %s %s %d: %d" % (key, op, limit, value), flush=True)
    held = {"=": value == limit, ">=": value >= limit, "<=": value <= limit}[op]
    assert held, "%s: %d, bound %s %d" % (key, value, op, limit)

def probe_cmd(p):
    return " ".join(p["exec"]["command"]) if "exec" in p else ""

checked = 0
# The DaemonSet.
ds = one("DaemonSet", "seedfs-mount")
spec = ds["spec"]["template"]["spec"]
sel = ds["spec"]["selector"]["matchLabels"]
assert all(ds["spec"]["template"]["metadata"]["labels"].get(k) == v for k, v in sel.items())
c = container(spec, "seedfs")
assert c["securityContext"]["privileged"] is True
caps = c["securityContext"]["capabilities"]["add"]
assert "SYS_ADMIN" in caps and "IPC_LOCK" in caps, caps
m = mount_of(c, "/models")
assert m["mountPropagation"] == "Bidirectional", m
assert volume(spec, m["name"])["hostPath"]["path"] == "/models"
f = mount_of(c, "/dev/fuse")
assert volume(spec, f["name"])["hostPath"] == {"path": "/dev/fuse", "type": "CharDevice"}
assert ".seedfs/status" in probe_cmd(c["readinessProbe"]), c["readinessProbe"]
assert ".seedfs/status" in probe_cmd(c["livenessProbe"]), c["livenessProbe"]
assert c["livenessProbe"].get("timeoutSeconds", 1) >= 5
assert c["lifecycle"]["preStop"]["exec"]["command"][:2] == ["fusermount3", "-u"]
assert "ulimit -l unlimited" in c["args"][0]
t = mount_of(c, "/etc/seedfs/token")
assert "secret" in volume(spec, t["name"]), "the token is not from a Secret"
checked += 1

# Secrets are files seedfs refuses unless 0600 or 0400 (docs/security.md):
# every Secret volume sets defaultMode 0400 (Kubernetes' default is 0644).
for name, d in docs:
    pod = d.get("spec", {}).get("template", {}).get("spec") or {}
    for v in pod.get("volumes", []):
        if "secret" in v:
            assert v["secret"].get("defaultMode") == 0o400, (name, v)

# The engine.
en = one("Deployment", "llm-engine")
spec = en["spec"]["template"]["spec"]
for c in spec["containers"] + spec.get("initContainers", []):
    m = mount_of(c, "/models")
    assert m["mountPropagation"] == "HostToContainer" and m["readOnly"] is True, m
    assert volume(spec, m["name"])["hostPath"]["path"] == "/models"
init = spec["initContainers"][0]
assert ".seedfs/status" in " ".join(init["command"])
checked += 1

# The seed sidecar and its Service.
sd = one("Deployment", "llm-seed")
spec = sd["spec"]["template"]["spec"]
assert len(spec["containers"]) >= 2
s = container(spec, "seedfs-seed")
e = container(spec, "engine")
shared = {m["name"] for m in s["volumeMounts"]} & {m["name"] for m in e["volumeMounts"]}
assert shared, "the seed does not share the engine's weights"
port = [p for p in s["ports"] if p["name"] == "control"][0]
for p in ("readinessProbe", "livenessProbe"):
    g = s[p]["httpGet"]
    assert g["path"] == "/v1/health" and g["port"] in ("control", port["containerPort"]), g
assert "IPC_LOCK" in s["securityContext"]["capabilities"]["add"]
svc = one("Service", "llm-seed")
labels = sd["spec"]["template"]["metadata"]["labels"]
assert all(labels.get(k) == v for k, v in svc["spec"]["selector"].items())
assert svc["spec"]["ports"][0]["port"] == 7070
t = mount_of(s, "/etc/seedfs/token")
assert "secret" in volume(spec, t["name"])
checked += 1

# The secure deployment: TLS on the control port and signed manifests.
def opt(cmd, o):
    m = re.search(r"(?<![\w-])" + re.escape(o) + r"\s+(\S+)", cmd)
    assert m, (o, cmd)
    return m.group(1).strip('"')

def source_of(spec, c, path):
    """Where the file @path of container @c comes from: (kind, name,
    key) of the Secret or ConfigMap whose items put it there."""
    ms = [m for m in c["volumeMounts"]
          if path.startswith(m["mountPath"].rstrip("/") + "/")]
    assert len(ms) == 1, (c["name"], path)
    v = volume(spec, ms[0]["name"])
    kind = "secret" if "secret" in v else "configMap" if "configMap" in v else None
    assert kind, (path, v)
    src = v[kind]
    items = {i["path"]: i["key"] for i in src.get("items", [])}
    rel = path[len(ms[0]["mountPath"].rstrip("/")) + 1:]
    assert rel in items, ("no item puts %s there" % path, items)
    return kind, src.get("secretName") or src.get("name"), items[rel]

spec = sd["spec"]["template"]["spec"]
scmd = " ".join(s["args"])
cert, key = (source_of(spec, s, opt(scmd, o)) for o in ("--tls-cert", "--tls-key"))
assert cert[0] == key[0] == "secret" and cert[1] == key[1], (cert, key)
assert (cert[2], key[2]) == ("tls.crt", "tls.key"), (cert, key)  # a kubernetes.io/tls Secret
assert opt(scmd, "--digest") == "sha256", scmd
sign = source_of(spec, s, opt(scmd, "--sign-key"))
assert sign[0] == "secret", sign
for p in ("readinessProbe", "livenessProbe"):
    assert s[p]["httpGet"].get("scheme") == "HTTPS", (p, s[p])
assert sd["spec"]["template"]["metadata"]["annotations"]["prometheus.io/scheme"] == "https"
dspec = ds["spec"]["template"]["spec"]
dc = container(dspec, "seedfs")
dcmd = " ".join(dc["args"])
ca = source_of(dspec, dc, opt(dcmd, "--tls-ca"))
pub = source_of(dspec, dc, opt(dcmd, "--trust-key"))
assert ca[0] in ("configMap", "secret") and pub[0] in ("configMap", "secret"), (ca, pub)
assert "--no-verify" not in dcmd and "http://" not in dcmd, dcmd
# Every seed's control port has TLS, every mount checks signatures.
insecure, secured = [], 0
for name, d in docs:
    pod = d.get("spec", {}).get("template", {}).get("spec")
    for c in (pod or {}).get("containers", []):
        cmd = " ".join(c.get("command", []) + c.get("args", []))
        if "exec seedfs seed" in cmd:
            secured += 1
            if not ("--tls-cert" in cmd and "--sign-key" in cmd):
                insecure.append((name, cmd))
        if "exec seedfs mount" in cmd:
            secured += 1
            if not ("--tls-ca" in cmd and "--trust-key" in cmd):
                insecure.append((name, cmd))
for i in insecure:
    print("without TLS or signatures: %s: %s" % i)
bound("insecure_command_lines", "=", 0, len(insecure))
assert secured >= 2, secured
checked += 1

# Scraped off loopback: a scrape token of its own (never the fleet
# token), and TLS on the mount's metrics port (docs/metrics.md).
cmd = " ".join(container(ds["spec"]["template"]["spec"], "seedfs")["args"])
assert "--metrics-listen 0.0.0.0:" in cmd, cmd
for o in ("--metrics-token-file", "--tls-cert", "--tls-key"):
    assert o in cmd, (o, cmd)
assert ds["spec"]["template"]["metadata"]["annotations"]["prometheus.io/scheme"] == "https"
assert "--metrics-token-file" in " ".join(s["args"]), s["args"]

# The DaemonSet's seeds are the sidecar's Service.
env = {v["name"]: v["value"] for v in container(ds["spec"]["template"]["spec"], "seedfs")["env"]}
assert env["SEEDFS_SEEDS"].startswith("llm-seed.seedfs.svc"), env

# Every seedfs command line: only options the command takes; no token in
# the clear anywhere.
lines = 0
unknown = []
for name, d in docs:
    text = yaml.safe_dump(d)
    assert not re.search(r"Bearer [A-Za-z0-9]", text), name
    pod = d.get("spec", {}).get("template", {}).get("spec")
    for c in (pod or {}).get("containers", []):
        cmd = " ".join(c.get("command", []) + c.get("args", []))
        for m in re.finditer(r"exec seedfs (\w+)(.*?)(?:$|&&|;)", cmd, re.S):
            sub, args = m.group(1), m.group(2)
            help = subprocess.run([seedfs, sub, "--help"], capture_output=True, text=True).stdout
            for o in re.findall(r"(?<![\w-])(--[a-z][a-z-]*|-o \w+)", args):
                key = o if o.startswith("--") else o.split()[1]
                if not re.search(r"(^|\s|,)" + re.escape(key) + r"\b", help):
                    unknown.append((name, sub, o))
            lines += 1
for u in unknown:
    print("not an option of its command: %s: seedfs %s %s" % u)
bound("unknown_options", "=", 0, len(unknown))
bound("command_lines_checked", ">=", 2, lines)
print("ok: %d YAML documents parse; DaemonSet, engine and seed sidecar checked; TLS and signed manifests end to end; %d seedfs command lines use only options their commands take" % (len(docs), lines))
PY
