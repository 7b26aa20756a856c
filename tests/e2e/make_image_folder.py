#!/usr/bin/env python3
"""make_image_folder.py: writes a small image-folder dataset for the e2e tests (no imaging
library: PNGs by hand with zlib, so the test needs only python3).

  make_image_folder.py OUT [--layout flat|split] [--size WxH] [--gray] [--per-class N]

Three classes that a small CNN tells apart in a few epochs: 'bars' (vertical stripes),
'rings' (a bright ring), 'stripes' (horizontal stripes), each with seeded noise. flat: OUT/<class>/;
split: OUT/train/<class>/ and OUT/test/<class>/ (a quarter of the images)."""
import argparse, os, random, struct, zlib

def png(path, w, h, channels, pixels):
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)
    color_type = 0 if channels == 1 else 2
    raw = b"".join(b"\x00" + bytes(pixels[r * w * channels:(r + 1) * w * channels]) for r in range(h))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, color_type, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))

def image(kind, w, h, channels, rng):
    out = []
    cx, cy = w / 2 + rng.uniform(-2, 2), h / 2 + rng.uniform(-2, 2)
    phase = rng.randrange(4)
    for y in range(h):
        for x in range(w):
            if kind == "bars": v = 200 if (x + phase) % 4 < 2 else 40
            elif kind == "stripes": v = 200 if (y + phase) % 4 < 2 else 40
            else: v = 220 if abs(((x - cx) ** 2 + (y - cy) ** 2) ** 0.5 - min(w, h) / 3) < 1.5 else 30
            v = max(0, min(255, int(v + rng.gauss(0, 25))))
            out += [v] if channels == 1 else [v, max(0, v - 30), min(255, v + 20)]
    return out

def main():
    a = argparse.ArgumentParser()
    a.add_argument("out")
    a.add_argument("--layout", default="flat", choices=["flat", "split"])
    a.add_argument("--size", default="20x16")
    a.add_argument("--gray", action="store_true")
    a.add_argument("--per-class", type=int, default=40)
    o = a.parse_args()
    w, h = map(int, o.size.split("x"))
    channels = 1 if o.gray else 3
    rng = random.Random(5)
    for kind in ["bars", "rings", "stripes"]:
        for i in range(o.per_class):
            split = "test" if o.layout == "split" and i % 4 == 0 else "train"
            d = os.path.join(o.out, split, kind) if o.layout == "split" else os.path.join(o.out, kind)
            os.makedirs(d, exist_ok=True)
            png(os.path.join(d, "%s_%03d.png" % (kind, i)), w, h, channels, image(kind, w, h, channels, rng))
    with open(os.path.join(o.out, "README.txt"), "w") as f: f.write("made by make_image_folder.py\n")

main()
