# tests/e2e/data_parallel_lib.sh: sourced by the data-parallel e2e tests (data_parallel_test.sh,
# multi_host_test.sh, workers_test.sh): their small models and the digest of a run's weights,
# one definition for the three.

# write_dp_models: in the current directory, mlp.yaml (a small MLP without dropout or
# BatchNorm, which are per rank by design) and bn.yaml (a small BatchNorm CNN).
write_dp_models() {
  cat > mlp.yaml <<'YAML'
name: small-mlp
layers:
  - flatten
  - linear: {out: 64}
  - gelu
  - linear: {out: classes}
YAML
  cat > bn.yaml <<'YAML'
name: small-bn
layers:
  - conv2d: {out: 8, kernel: 3, padding: 1}
  - batchnorm2d
  - relu
  - maxpool2d: {kernel: 2}
  - flatten
  - linear: {out: classes}
YAML
}

# dump_weights DIR: a digest of each model tensor in the run's last checkpoint.
dump_weights() {
  /usr/bin/python3 - "$1" <<'PY'
import glob, hashlib, json, struct, sys
f = sorted(glob.glob(sys.argv[1] + "/step-*.safetensors"))[-1]
data = open(f, "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
for k in sorted(header):
    if k == "__metadata__" or k.startswith("optimizer."): continue
    b, e = header[k]["data_offsets"]
    print(k, hashlib.sha256(data[8 + n + b:8 + n + e]).hexdigest())
PY
}
# same_weights A B: the last checkpoints of two runs hold the same model tensors, bit for bit.
same_weights() { cmp -s <(dump_weights "$1") <(dump_weights "$2"); }
