#!/usr/bin/env python3
"""make_seeds.py: writes the seed corpora tests/fuzz/corpus/<harness>/ (small valid files and
a few edge cases each). Standard library only; run from anywhere:

    /usr/bin/python3 tests/fuzz/make_seeds.py

Files named valid_* must be accepted by the parser; fuzz_corpus_replay_test checks that, so
the seeds really reach the code past validation. Every other seed must be refused cleanly."""
import base64
import gzip
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(harness, name, data):
    d = os.path.join(HERE, "corpus", harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def gz(data):
    return gzip.compress(data, compresslevel=9, mtime=0)  # mtime 0: reproducible bytes


# ---------------------------------------------------------------- safetensors

DTYPE_SIZE = {"F32": 4, "F16": 2, "BF16": 2, "F64": 8, "I64": 8, "I32": 4, "U8": 1}


def safetensors(tensors, metadata=None, pad=True):
    """tensors: list of (name, dtype, shape, bytes) in data order."""
    header, data, off = {}, b"", 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        data += raw
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + data


def st_seeds():
    write("safetensors", "valid_empty", safetensors([]))
    write("safetensors", "valid_one_f32", safetensors([("w", "F32", [2], struct.pack("<2f", 1.5, -2))]))
    write("safetensors", "valid_every_dtype", safetensors(
        [(dt.lower(), dt, [2, 1], bytes(range(2 * n))) for dt, n in DTYPE_SIZE.items()],
        metadata={"format": "pt", "step": "3"}))
    write("safetensors", "valid_scalar_and_empty", safetensors(
        [("s", "F64", [], struct.pack("<d", 3.25)), ("e", "I32", [0, 4], b"")]))
    write("safetensors", "valid_unpadded_unknown_field",
          struct.pack("<Q", 67) + b'{"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3],"x":[1,{}]}}   '
          + b"abc")
    write("safetensors", "overlap", safetensors([("a", "F32", [1], b"\0" * 4)])[:8] + b"x")
    write("safetensors", "short_length", b"\x05\0\0")
    bad = b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}'
    write("safetensors", "offsets_mismatch", struct.pack("<Q", len(bad)) + bad + b"\0" * 4)


# ---------------------------------------------------------------- checkpoint

def checkpoint_seed(scaler, extra_meta=None):
    w = struct.pack("<4f", 0.5, -1, 2, 0)
    b = struct.pack("<2f", 0.1, 0.2)
    tensors = [("fc.bias", "F32", [2], b), ("fc.weight", "F32", [2, 2], w),
               ("optimizer.momentum_buffer.0", "F32", [2, 2], w)]
    meta = {"format": "mixprec-checkpoint", "version": "1", "model_name": "mlp",
            "precision": "fp16", "model_tensors": json.dumps(["fc.weight", "fc.bias"]),
            "scaler": json.dumps(scaler), "rng_state": "12345 67890",
            "optimizer_steps": "7", "epoch": "1", "batch_in_epoch": "3", "global_step": "7",
            "config": json.dumps({"model": "mlp", "lr": 0.01, "batch_size": 4})}
    meta.update(extra_meta or {})
    return safetensors(tensors, meta)


def ckpt_seeds():
    write("checkpoint", "valid_fp16", checkpoint_seed(
        {"scale": 65536.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2000,
         "_growth_tracker": 12}))
    write("checkpoint", "valid_nonfinite_scale", checkpoint_seed({"scale": "inf"}))
    write("checkpoint", "bad_version", checkpoint_seed({}, {"version": "2"}))
    write("checkpoint", "bad_counter", checkpoint_seed({}, {"epoch": "-1"}))
    write("checkpoint", "unlisted_tensor", checkpoint_seed({}, {"model_tensors": '["fc.weight"]'}))


# ---------------------------------------------------------------- config.json

def config_seeds():
    full = {"model": "cnn", "dataset": "fashion-mnist", "data_dir": "", "precision": "fp16",
            "epochs": 2, "max_steps": 0, "batch_size": 64, "lr": 0.01, "optimizer": "sgd",
            "momentum": 0.9, "weight_decay": 0.0, "seed": 1, "threads": 0, "shuffle": True,
            "init_scale": 65536.0, "growth_factor": 2.0, "backoff_factor": 0.5,
            "growth_interval": 2000, "clip_grad_norm": 0.0, "accumulate": 1}
    write("config_json", "valid_full", json.dumps(full, indent=2).encode())
    write("config_json", "valid_empty", b"{}")
    write("config_json", "valid_unknown_keys", b'{"future_key": [1, {"a": null}], "lr": 1e-3}')
    write("config_json", "wrong_type", b'{"epochs": "two"}')
    write("config_json", "not_object", b"[1, 2, 3]")
    write("config_json", "truncated", b'{"model": "cn')


# ---------------------------------------------------------------- IDX

def idx_images(count, side, pixels=None):
    h = struct.pack(">IIII", 0x803, count, side, side)
    return h + (pixels if pixels is not None else bytes((i * 7) % 256 for i in range(count * side * side)))


def idx_seeds():
    write("idx", "valid_images_2x3x3", idx_images(2, 3))
    write("idx", "valid_images_gzip", gz(idx_images(3, 2)))
    write("idx", "valid_labels", struct.pack(">II", 0x801, 5) + bytes([0, 9, 3, 1, 2]))
    write("idx", "valid_labels_gzip", gz(struct.pack(">II", 0x801, 3) + bytes([1, 2, 3])))
    write("idx", "truncated_images", idx_images(4, 3)[:30])
    write("idx", "label_out_of_range", struct.pack(">II", 0x801, 2) + bytes([1, 200]))
    write("idx", "huge_claim", struct.pack(">IIII", 0x803, 0xFFFFFFFF, 1024, 1024))
    write("idx", "gzip_trailing_garbage", gz(idx_images(1, 2)) + b"junk")


# ---------------------------------------------------------------- CIFAR-10

def cifar_record(label, seed):
    return bytes([label]) + bytes((seed * 31 + i) % 256 for i in range(3072))


def cifar_seeds():
    write("cifar", "valid_one_record", cifar_record(3, 1))
    write("cifar", "valid_two_records_gzip", gz(cifar_record(0, 2) + cifar_record(9, 3)))
    write("cifar", "bad_label", cifar_record(10, 4))
    write("cifar", "partial_record", cifar_record(1, 5)[:100])


# ---------------------------------------------------------------- CSV tables

def csv_seeds():
    write("csv", "valid_numeric_labels", b"a,b,label\n1,2,0\n3.5,-4e2,1\n0,0,2\n")
    write("csv", "valid_named_labels_crlf_quotes",
          b'x,"y, quoted",label\r\n1,2,"cat"\r\n3,4,"dog ""d"""\r\n\r\n5,6,cat\r\n')
    write("csv", "trailing_comma_empty_field", b"a,label,\n1,3,\n2,4,\n")
    write("csv", "ragged_row", b"a,b,label\n1,2,0\n3,1\n")
    write("csv", "nan_value", b"a,label\nnan,0\n")
    write("csv", "no_label_column", b"a,b\n1,2\n")
    write("csv", "open_quote", b'a,label\n"1,0\n')
    write("csv", "header_only", b"a,b,label\n")
    write("csv", "duplicate_column", b"a,a,label\n1,2,0\n")
    # Texts (--text-column text; the harness also reads every input that way, with --skip-bad).
    write("csv", "valid_text_column", b'id,text,label\n1,"hello, world",greeting\n2,bye,farewell\n'
                                      b'3,"she said ""hi""",greeting\n')
    write("csv", "text_ragged_row", b'text,label\n"a ragged",row,x\nok,y\n')


# ---------------------------------------------------------------- model files

def model_file_seeds():
    write("model_file", "valid_small_cnn",
          b"layers:\n  - conv2d: {out: 4, kernel: 3, padding: 1}\n    name: conv1\n  - batchnorm2d\n  - relu\n"
          b"  - maxpool2d: {kernel: 2}\n  - flatten\n  - linear: {out: classes}\n    precision: fp32\n")
    write("model_file", "valid_residual_repeat",
          b"name: r\nlayers:\n  - conv2d: {out: 4, padding: 1}\n  - repeat: 2\n    layers:\n      - residual:\n"
          b"          - conv2d: {out: 4, padding: 1}\n          - gelu\n  - global_avgpool\n  - layernorm\n"
          b"  - dropout: {p: 0.1}\n  - linear: {out: 3}\n")
    write("model_file", "valid_json", b'{"layers": ["flatten", {"linear": {"out": "classes", "bias": false}}]}')
    write("model_file", "unknown_type", b"layers: [flaten, {linear: {out: 3}}]\n")
    write("model_file", "shape_mismatch", b"layers:\n  - residual:\n      - conv2d: {out: 5, padding: 1}\n")
    write("model_file", "too_wide", b"layers: [flatten, {linear: {out: 65536}}, {linear: {out: 65536}}]\n")
    # Text classifiers (the harness also plans every input over 8 byte ids).
    with open(os.path.join(HERE, "..", "..", "models", "text-encoder.yaml"), "rb") as f:
        write("model_file", "valid_text_encoder", f.read())
    with open(os.path.join(HERE, "..", "..", "models", "transformer.yaml"), "rb") as f:
        write("model_file", "valid_transformer_rows", f.read())
    write("model_file", "text_heads_do_not_divide",
          b"layers: [{embedding: {dim: 6}}, {encoder: {heads: 4}}, global_avgpool, {linear: {out: classes}}]\n")
    # Language models (a file ending in lm_head; the text reading plans them).
    with open(os.path.join(HERE, "..", "..", "models", "gpt-tiny.yaml"), "rb") as f:
        write("model_file", "valid_language_model", f.read())
    write("model_file", "valid_language_model_untied",
          b"layers: [{embedding: {dim: 8, context: 16}}, {decoder: {heads: 2}}, gelu, {lm_head: {tied: false}}]\n")
    write("model_file", "language_model_encoder_peeks",
          b"layers: [{embedding: {dim: 8}}, {encoder: {heads: 2}}, lm_head]\n")


# ---------------------------------------------------------------- serve request bodies

def png(width, height, rows, color=False):
    """A minimal 8-bit PNG (gray, or RGB when color) of the given rows of pixel bytes."""
    import zlib

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xffffffff)
    raw = b"".join(b"\x00" + bytes(r) for r in rows)
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2 if color else 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def npy_bytes(descr, shape, data):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data


def serve_request_seeds():
    # First byte: (model input << 2) | content type; inputs 0: 1x4x3 pixels, 1: 3x4x3, 2: a
    # table of features a, b, c (bit 7: a text classifier instead); types 0: JSON, 1: .npy,
    # 2: PNG, 3: none (sniffed).
    grid = b"[[0,1,2],[3,4,5],[6,7,8],[9,10,255]]"
    write("serve_request", "valid_json_bare_grid", b"\x00" + grid)
    write("serve_request", "valid_json_inputs_unit",
          b'\x00{"scale": "unit", "inputs": [[0.5,0,0,0,0,0,0,0,0,0,0,1], [[0,1,0],[1,0.25,1],[0,0,0],[1,1,1]]]}')
    write("serve_request", "valid_table_objects", bytes([2 << 2]) + b'{"inputs": [{"a": 1, "b": -2.5, "c": 3e3}, [4, 5, 6]]}')
    write("serve_request", "valid_npy_batch", b"\x01" + npy_bytes("|u1", "(2, 4, 3)", bytes(range(24))))
    write("serve_request", "valid_png_sniffed", b"\x03" + png(3, 4, [[0, 100, 200]] * 4))
    write("serve_request", "valid_png_rgb", bytes([(1 << 2) | 2]) + png(3, 4, [[10, 20, 30] * 3] * 4, color=True))
    write("serve_request", "ragged", b"\x00[[1,2,3],[3]]")
    write("serve_request", "out_of_range", b"\x00[[0,0,0],[0,0,0],[0,0,0],[0,0,256]]")
    # Top bit: a text classifier reading 6 bytes per text.
    write("serve_request", "valid_text_strings", b'\x80{"inputs": ["a text", "another, longer text than six bytes", ""]}')
    write("serve_request", "text_numbers_refused", b'\x80{"inputs": [[1, 2, 3]]}')
    # Top two bits: a language model of context 6 (prompts; their last 6 bytes).
    write("serve_request", "valid_prompts", b'\xc0{"inputs": ["In the beginning", "a", "\\u0000x"]}')
    write("serve_request", "empty_prompt_refused", b'\xc0{"inputs": [""]}')
    # A POST /v1/generate body (every input is also decoded as one).
    write("serve_request", "generate_settings", b'\xc0{"prompt": "And God", "max_tokens": 64, "temperature": 0.5, '
          b'"top_k": 0, "seed": 18446744073709551615}')
    write("serve_request", "png_too_wide", b"\x02" + png(300, 1, [[0] * 300]))
    write("serve_request", "npy_wrong_shape", b"\x01" + npy_bytes("<f4", "(3, 4)", b"\x00" * 48))


# ---------------------------------------------------------------- images (PNG, JPEG)

# Two JPEGs written once with OpenCV's encoder (libjpeg-turbo; /usr/bin/python3 with
# python3-opencv: cv2.imencode(".jpg", pixels, [cv2.IMWRITE_JPEG_QUALITY, 90] + the progressive
# flag for the second)) and kept here as base64, so that this script needs nothing but the
# standard library: a baseline 3x4 gray image and a progressive 3x4 RGB one.
JPEG_GRAY_3X4 = base64.b64decode(
        "/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAAMCAgMCAgMDAwMEAwMEBQgFBQQEBQoHBwYIDAoMDAsKCwsNDhIQDQ4R"
        "DgsLEBYQERMUFRUVDA8XGBYUGBIUFRT/wAALCAAEAAMBAREA/8QAHwAAAQUBAQEBAQEAAAAAAAAAAAECAwQFBgcI"
        "CQoL/8QAtRAAAgEDAwIEAwUFBAQAAAF9AQIDAAQRBRIhMUEGE1FhByJxFDKBkaEII0KxwRVS0fAkM2JyggkKFhcY"
        "GRolJicoKSo0NTY3ODk6Q0RFRkdISUpTVFVWV1hZWmNkZWZnaGlqc3R1dnd4eXqDhIWGh4iJipKTlJWWl5iZmqKj"
        "pKWmp6ipqrKztLW2t7i5usLDxMXGx8jJytLT1NXW19jZ2uHi4+Tl5ufo6erx8vP09fb3+Pn6/9oACAEBAAA/APaf"
        "C/7Enwm/4R+x/wCKf/5Z/wB5f/ia/9k=")
JPEG_RGB_PROGRESSIVE_3X4 = base64.b64decode(
        "/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAAMCAgMCAgMDAwMEAwMEBQgFBQQEBQoHBwYIDAoMDAsKCwsNDhIQDQ4R"
        "DgsLEBYQERMUFRUVDA8XGBYUGBIUFRT/2wBDAQMEBAUEBQkFBQkUDQsNFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQU"
        "FBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBT/wgARCAAEAAMDASIAAhEBAxEB/8QAFQABAQAAAAAAAAAAAAAAAAAA"
        "AAb/xAAVAQEBAAAAAAAAAAAAAAAAAAAEBv/aAAwDAQACEAMQAAABlBdG/8QAFxAAAwEAAAAAAAAAAAAAAAAAAgMF"
        "Ev/aAAgBAQABBQI6L9f/xAAaEQACAgMAAAAAAAAAAAAAAAABAgAEEiOR/9oACAEDAQE/AUp1sRrXgn//xAAbEQAB"
        "BAMAAAAAAAAAAAAAAAABAAIDBBIjkv/aAAgBAgEBPwGOhTwGlvIX/8QAFhAAAwAAAAAAAAAAAAAAAAAAAAEi/9oA"
        "CAEBAAY/AnR//8QAFBABAAAAAAAAAAAAAAAAAAAAAP/aAAgBAQABPyEr/9oADAMBAAIAAwAAABAH/8QAGBEAAgMA"
        "AAAAAAAAAAAAAAAAAAERYfD/2gAIAQMBAT8QoEtQf//EABgRAAIDAAAAAAAAAAAAAAAAAAABYXGR/9oACAECAQE/"
        "EISrCj//xAAXEAADAQAAAAAAAAAAAAAAAAAAYXHR/9oACAEBAAE/EKQ9P//Z")


def png_chunks(width, height, depth, color_type, raw, extra=()):
    """A PNG from already filtered scanlines `raw` (each row: a filter byte, then pixels)."""
    import zlib

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xffffffff)
    ihdr = struct.pack(">IIBBBBB", width, height, depth, color_type, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + b"".join(chunk(k, b) for k, b in extra) +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def image_seeds():
    write("image", "valid_png_gray", png(3, 4, [[0, 100, 200]] * 4))
    write("image", "valid_png_rgb", png(3, 2, [[10, 20, 30] * 3] * 2, color=True))
    # 16-bit RGBA (alpha dropped, 16 -> 8 bits) and a 2-entry palette with transparency.
    rgba16 = b"".join(b"\x00" + b"\x12\x34\x56\x78\x9a\xbc\xff\xff" * 2 for _ in range(2))
    write("image", "valid_png_rgba16", png_chunks(2, 2, 16, 6, rgba16))
    write("image", "valid_png_palette", png_chunks(2, 2, 8, 3, b"\x00\x00\x01" * 2,
                                                   [(b"PLTE", b"\xff\x00\x00\x00\x00\xff"), (b"tRNS", b"\x80")]))
    write("image", "valid_jpeg_gray", JPEG_GRAY_3X4)
    write("image", "valid_jpeg_rgb_progressive", JPEG_RGB_PROGRESSIVE_3X4)
    write("image", "png_too_wide", png(65, 1, [[0] * 65]))
    write("image", "png_truncated", png(3, 4, [[0, 100, 200]] * 4)[:60])
    write("image", "jpeg_truncated", JPEG_GRAY_3X4[:200])
    write("image", "jpeg_header_only", JPEG_GRAY_3X4[:20])
    write("image", "neither", b"GIF89a\x01\x00\x01\x00")


# ---------------------------------------------------------------- http_request

def http_request_seeds():
    """The first byte is the size of the pieces the request is fed in (1 + byte % 16)."""
    post = (b"POST /v1/predict?top_k=3 HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b"Content-Length: 14\r\n\r\n{\"inputs\": []}")
    write("http_request", "valid_get", b"\x00GET /healthz HTTP/1.1\r\nHost: localhost:8080\r\n\r\n")
    write("http_request", "valid_post_json", b"\x03" + post)
    write("http_request", "valid_chunked", b"\x05POST /v1/generate HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
          b"\r\n4;x=y\r\n{\"a\"\r\n3\r\n: 1\r\n1\r\n}\r\n0\r\nX-Trailer: 1\r\n\r\n")
    write("http_request", "valid_pipelined", b"\x07" + post + b"GET /metrics HTTP/1.1\r\nHost: h\r\n\r\n")
    write("http_request", "valid_http10_absolute", b"\x01GET http://h/v1/model?a=%41&b HTTP/1.0\r\n\r\n")
    write("http_request", "valid_expect_continue", b"\x0fPOST /p HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n"
          b"Content-Length: 2\r\n\r\nok")
    write("http_request", "conflicting_lengths", b"\x02POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n"
          b"Content-Length: 2\r\n\r\nab")
    write("http_request", "te_and_length", b"\x02POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n"
          b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
    write("http_request", "chunk_past_limit", b"\x04POST /p HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
          b"fffffff\r\n")
    write("http_request", "invalid_utf8_path", b"\x00GET /x%FF?top_k=%FF HTTP/1.1\r\nHost: h\r\n\r\n")
    write("http_request", "folded_header", b"\x00GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n")
    write("http_request", "bare_cr", b"\x00GET / HTTP/1.1\r\nHost: h\rX: 1\r\n\r\n")


# ---------------------------------------------------------------- experiment_file

def experiment_file_seeds():
    w = lambda name, text: write("experiment_file", name, text.encode())
    w("valid_asha", """name: lr-sweep
base:
  recipe: r.yaml
  dataset: synthetic
  batch_size: 64
hyperparameters:
  lr: {type: log, min: 1.0e-4, max: 1.0e-1}
  weight_decay: {type: double, min: 0, max: 0.1}
  warmup_steps: {type: int, min: 0, max: 10}
  optimizer: {type: categorical, values: [adam, sgd]}
  precision: fp32
searcher: {name: asha, max_trials: 16, reduction_factor: 2, min_steps: 4, seed: 7}
max_steps: 32
max_concurrent_trials: 2
ranks_per_trial: 2
metric: loss
max_seconds: 600
max_restarts: 2
keep_checkpoints: 3
""")
    w("valid_grid", """name: g
hyperparameters:
  lr: {type: log, min: 0.001, max: 0.1, count: 3}
  batch_size: {type: int, min: 16, max: 64, count: 4}
  optimizer: {type: categorical, values: [adam, sgd]}
searcher: {name: grid}
max_steps: 10
""")
    w("valid_random_json", json.dumps({"name": "r", "hyperparameters": {"lr": {"type": "double", "min": 0.001,
          "max": 0.01}}, "searcher": {"name": "random", "max_trials": 5, "seed": 3}, "metric": "accuracy"}))
    w("valid_asha_rungs", "name: a\nmax_steps: 64\nsearcher: {name: asha, max_trials: 9, rungs: 3}\n")
    w("bad_ranks", "name: x\nranks_per_trial: 0\nsearcher: {name: random, max_trials: 2}\n")
    w("bad_key", "name: x\nhyperparameters:\n  lrr: 0.1\nsearcher: {name: random, max_trials: 2}\n")
    w("bad_log", "name: x\nhyperparameters:\n  lr: {type: log, min: 0, max: 1}\nsearcher: {name: random, max_trials: 2}\n")
    w("bad_recipe", "name: x\nbase: {recipe: other.yaml}\nsearcher: {name: random, max_trials: 2}\n")
    w("truncated", "name: x\nhyperparameters:\n  lr: {type: log, min: 0.1, ma")
    state = {"format": "mixprec-experiment", "version": 1, "name": "e", "status": "running",
             "experiment": {"name": "e"},
             "trials": [{"id": 1, "dir": "trial-0001", "hyperparameters": {"lr": 0.01, "optimizer": "sgd"},
                         "state": "paused", "target_rung": 1, "metrics": [0.5, None], "steps": 8, "restarts": 0,
                         "seconds": 1.5, "error": ""}]}
    w("state", json.dumps(state, indent=1))
    state["trials"][0]["dir"] = "../x"
    w("state_bad_dir", json.dumps(state))
    state["trials"][0]["dir"] = "trial-0001"
    w("state_float_id", json.dumps(state).replace('"id": 1,', '"id": 1e300,'))


if __name__ == "__main__":
    experiment_file_seeds()
    image_seeds()
    serve_request_seeds()
    model_file_seeds()
    csv_seeds()
    st_seeds()
    ckpt_seeds()
    config_seeds()
    idx_seeds()
    cifar_seeds()
    http_request_seeds()
