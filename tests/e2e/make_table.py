#!/usr/bin/env python3
"""make_table.py: writes a small CSV classification table for the e2e tests (python3 only).

  make_table.py OUT.csv [--rows N] [--named] [--seed S]

Four feature columns on very different scales (so per-column normalisation matters) and a
label column: three classes, each a Gaussian blob. --named writes the labels as names
("setosa", "versicolor", "virginica"), else as 0, 1, 2; the label column is the third."""
import argparse, random

a = argparse.ArgumentParser()
a.add_argument("out")
a.add_argument("--rows", type=int, default=150)
a.add_argument("--named", action="store_true")
a.add_argument("--seed", type=int, default=3)
o = a.parse_args()
rng = random.Random(o.seed)
names = ["setosa", "versicolor", "virginica"]
centres = [(1.0, 200.0, 0.001, -5.0), (2.0, 260.0, 0.003, 0.0), (3.0, 320.0, 0.002, 5.0)]
spread = (0.25, 15.0, 0.0004, 1.2)
with open(o.out, "w") as f:
    f.write("sepal,weight,ratio,species,offset\n")
    for i in range(o.rows):
        k = i % 3
        x = [rng.gauss(centres[k][j], spread[j]) for j in range(4)]
        label = names[k] if o.named else str(k)
        f.write("%.6g,%.6g,%.6g,%s,%.6g\n" % (x[0], x[1], x[2], label, x[3]))
