"""Label leakage of the synthetic twins: can a probe that does not read tell tool-required from tool-redundant?

    .venv/bin/python scripts/bench_synth_leakage.py                       # 160 tasks per seed, v1/v2/v3
    .venv/bin/python scripts/bench_synth_leakage.py --n 400 --epochs 40 --threads 2   # a bigger run

For each generator it generates ``--n`` tasks with each of two seeds (timed: tasks/s), trains every
probe on the seed-A tasks and tests it on the seed-B tasks, and the other way round. Figure: held-out
MCC (Matthews correlation) of the predicted vs true mode label; 0 = no leak, 1 = the probe gives the
label away. Goal for v3: every probe at most 0.3.

Probes (the first image of each task, unless said otherwise):

- ``pixels64``: logistic regression on the 64x64 RGB thumbnail; ``relu256``: on 256 random ReLU features of it;
- ``cnn64`` / ``cnn128``: a small CNN (3 conv layers, global pooling) on the grey image at 64 / 128 px;
- ``edges_gbt``: edge-strength, contrast and brightness histograms (whole image and a 4x4 grid of tiles)
  with boosted trees (scikit-learn's HistGradientBoostingClassifier);
- ``hog``: HOG descriptors (8 px cells, 2x2 blocks, 9 orientations) of the grey 128 px image, logistic regression;
- ``bytes_gbt``: the image's stored size, its size recompressed as PNG and as JPEG (q 75), per pixel, boosted trees;
- ``prompt_bow``: bag of words of all the task's prompts, logistic regression;
- ``counts_gbt``: number of turns, images and prompt words, boosted trees;
- ``ocr_bow``: a reader that never sees the question: the words Tesseract (``vtb_env.ocr``) reads in the first
  image, numbers by their shape (every digit read as 9), as a bag of words, logistic regression;
- ``ocr2_bow``: the same with RapidOCR (``ocr.RapidOcrEngine``; left out, with a note, where it is not installed).

The reading probes cost about a second (Tesseract) and two to eight (RapidOCR) per task on this machine.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import time
from typing import Callable

import numpy as np

Data = dict[str, object]


def _grey(image, px: int) -> np.ndarray:
    from PIL import Image

    return np.asarray(image.convert("L").resize((px, px), Image.Resampling.BOX), np.float32) / 255


READERS = {"ocr_bow": "tesseract", "ocr2_bow": "rapidocr"}  # reading probe: the reader it needs


def _reader(name: str):
    from vtb_env import ocr

    return ocr.TesseractEngine() if name == "tesseract" else ocr.RapidOcrEngine()


def features(tasks, readers: tuple[str, ...] = ()) -> Data:
    """Everything the probes look at, computed once per task (``readers``: the OCR engines to read with)."""
    from PIL import Image

    from vtb_env import ocr

    engines = {name: _reader(name) for name in readers}
    read: dict[str, list[str]] = {name: [] for name in readers}

    rgb64, grey64, grey128, sizes, prompts, counts = [], [], [], [], [], []
    for task in tasks:
        ref = task.images[0]
        image = ref.open().convert("RGB")
        rgb64.append(np.asarray(image.resize((64, 64), Image.Resampling.BOX), np.float32).ravel() / 255)
        grey64.append(_grey(image, 64))
        grey128.append(_grey(image, 128))
        png, jpeg = io.BytesIO(), io.BytesIO()
        image.save(png, format="PNG", compress_level=6)
        image.save(jpeg, format="JPEG", quality=75)
        pixels = image.width * image.height
        sizes.append(
            [len(ref.read_bytes()) / pixels, png.tell() / pixels, jpeg.tell() / pixels, image.width, image.height]
        )
        for name, engine in engines.items():
            read[name].append(ocr.text_of(image, engine))
        text = " ".join(turn.prompt for turn in task.turns)
        prompts.append(text)
        counts.append([len(task.turns), len(task.images), len(text.split())])
    return {
        "y": np.array([t.mode_label == "tool_required" for t in tasks], int),
        "rgb64": np.stack(rgb64),
        "grey64": np.stack(grey64),
        "grey128": np.stack(grey128),
        "bytes": np.array(sizes, np.float32),
        "prompts": prompts,
        "counts": np.array(counts, np.float32),
        **{f"read_{name}": texts for name, texts in read.items()},
    }


def _mcc(y_true, y_pred) -> float:
    from sklearn.metrics import matthews_corrcoef

    return float(matthews_corrcoef(y_true, y_pred))


def _logistic(xa, ya, xb) -> np.ndarray:
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler().fit(xa)
    return LogisticRegression(max_iter=3000, C=1.0).fit(scaler.transform(xa), ya).predict(scaler.transform(xb))


def _trees(xa, ya, xb) -> np.ndarray:
    from sklearn.ensemble import HistGradientBoostingClassifier

    return HistGradientBoostingClassifier(max_iter=200, learning_rate=0.05, random_state=0).fit(xa, ya).predict(xb)


def probe_pixels(a: Data, b: Data, _args) -> np.ndarray:
    return _logistic(a["rgb64"], a["y"], b["rgb64"])


def probe_relu(a: Data, b: Data, _args) -> np.ndarray:
    xa, xb = a["rgb64"], b["rgb64"]
    rng = np.random.default_rng(0)
    weights = rng.normal(0, 1 / np.sqrt(xa.shape[1]), size=(xa.shape[1], 256)).astype(np.float32)
    bias = rng.normal(0, 1, size=256).astype(np.float32)
    centre = xa.mean(axis=0)
    fa, fb = (np.maximum(0, (x - centre) @ weights * 8 + bias) for x in (xa, xb))
    return _logistic(fa, a["y"], fb)


def _edge_stats(grey: np.ndarray) -> np.ndarray:
    """Histograms of gradient magnitude, local contrast and brightness, whole image and per 4x4 tile."""
    gy, gx = np.gradient(grey)
    magnitude = np.hypot(gx, gy)
    out = []
    for window in [(slice(None), slice(None))] + [
        (slice(i * 32, (i + 1) * 32), slice(j * 32, (j + 1) * 32)) for i in range(4) for j in range(4)
    ]:
        m, g = magnitude[window], grey[window]
        out += list(np.histogram(m, bins=8, range=(0, 0.5))[0] / m.size)
        out += list(np.histogram(g, bins=8, range=(0, 1))[0] / g.size)
        out += [float(m.mean()), float(m.std()), float(g.std()), float(np.percentile(g, 95) - np.percentile(g, 5))]
    return np.array(out, np.float32)


def probe_edges(a: Data, b: Data, _args) -> np.ndarray:
    fa, fb = (np.stack([_edge_stats(g) for g in d["grey128"]]) for d in (a, b))
    return _trees(fa, a["y"], fb)


def _hog(grey: np.ndarray, cell: int = 8, bins: int = 9) -> np.ndarray:
    """Histogram of oriented gradients: unsigned orientation histograms per 8x8 cell, each 2x2 block
    of cells L2-normalised (clipped at 0.2 and renormalised, as in Dalal and Triggs)."""
    gy, gx = np.gradient(grey)
    magnitude, angle = np.hypot(gx, gy), np.rad2deg(np.arctan2(gy, gx)) % 180
    index = np.minimum((angle / (180 / bins)).astype(int), bins - 1)
    cy, cx = grey.shape[0] // cell, grey.shape[1] // cell
    hist = np.zeros((cy, cx, bins), np.float32)
    rows, cols = np.indices(grey.shape)
    np.add.at(hist, (rows // cell, cols // cell, index), magnitude)
    blocks = []
    for i in range(cy - 1):
        for j in range(cx - 1):
            block = hist[i : i + 2, j : j + 2].ravel()
            block = np.minimum(block / (np.linalg.norm(block) + 1e-6), 0.2)
            blocks.append(block / (np.linalg.norm(block) + 1e-6))
    return np.concatenate(blocks)


def probe_hog(a: Data, b: Data, _args) -> np.ndarray:
    fa, fb = (np.stack([_hog(g) for g in d["grey128"]]) for d in (a, b))
    return _logistic(fa, a["y"], fb)


def probe_bytes(a: Data, b: Data, _args) -> np.ndarray:
    return _trees(a["bytes"], a["y"], b["bytes"])


def probe_prompts(a: Data, b: Data, _args) -> np.ndarray:
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import LogisticRegression

    vectorizer = CountVectorizer(min_df=1).fit(a["prompts"])
    model = LogisticRegression(max_iter=3000).fit(vectorizer.transform(a["prompts"]), a["y"])
    return model.predict(vectorizer.transform(b["prompts"]))


def _shapes(text: str) -> list[str]:
    """The words read, lower case, every digit as 9: a number enters by its shape ("$175.32" -> "$999.99")."""
    return [re.sub(r"\d", "9", word.lower()) for word in text.split()]


def _reading(reader: str) -> Callable[[Data, Data, argparse.Namespace], np.ndarray]:
    def probe(a: Data, b: Data, _args) -> np.ndarray:
        from sklearn.feature_extraction.text import CountVectorizer
        from sklearn.linear_model import LogisticRegression

        texts_a, texts_b = a[f"read_{reader}"], b[f"read_{reader}"]
        vectorizer = CountVectorizer(analyzer=_shapes, binary=True).fit(texts_a)
        model = LogisticRegression(max_iter=3000).fit(vectorizer.transform(texts_a), a["y"])
        return model.predict(vectorizer.transform(texts_b))

    return probe


def probe_counts(a: Data, b: Data, _args) -> np.ndarray:
    return _trees(a["counts"], a["y"], b["counts"])


def _cnn(px: int) -> Callable[[Data, Data, argparse.Namespace], np.ndarray]:
    def probe(a: Data, b: Data, args) -> np.ndarray:
        import torch
        from torch import nn

        torch.manual_seed(0)
        xa = torch.tensor(a[f"grey{px}"]).unsqueeze(1)
        xb = torch.tensor(b[f"grey{px}"]).unsqueeze(1)
        ya = torch.tensor(a["y"], dtype=torch.float32)
        stem = (  # 128 px: a strided first layer keeps the cost of the 64 px net but sees the finer detail
            [nn.Conv2d(1, 16, 4, stride=2, padding=1), nn.ReLU()]
            if px == 128
            else [nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)]
        )
        model = nn.Sequential(
            *stem,
            nn.Conv2d(16, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveMaxPool2d(1),
            nn.Flatten(),
            nn.Linear(64, 1),
        )
        optimizer = torch.optim.Adam(model.parameters(), lr=2e-3, weight_decay=1e-4)
        generator = torch.Generator().manual_seed(0)
        for _ in range(args.epochs):
            order = torch.randperm(len(xa), generator=generator)
            for start in range(0, len(xa), 32):
                batch = order[start : start + 32]
                images = xa[batch]
                if torch.rand(1, generator=generator).item() < 0.5:  # mirror: the label does not depend on it
                    images = images.flip(-1)
                loss = nn.functional.binary_cross_entropy_with_logits(model(images).squeeze(1), ya[batch])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        with torch.no_grad():
            return (model(xb).squeeze(1) > 0).int().numpy()

    return probe


PROBES: dict[str, Callable[[Data, Data, argparse.Namespace], np.ndarray]] = {
    "pixels64": probe_pixels,
    "relu256": probe_relu,
    "cnn64": _cnn(64),
    "cnn128": _cnn(128),
    "edges_gbt": probe_edges,
    "hog": probe_hog,
    "bytes_gbt": probe_bytes,
    "prompt_bow": probe_prompts,
    "counts_gbt": probe_counts,
    "ocr_bow": _reading("tesseract"),
    "ocr2_bow": _reading("rapidocr"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=160, help="tasks per seed (twins count)")
    parser.add_argument("--train-seed", type=int, default=1)
    parser.add_argument("--test-seed", type=int, default=2)
    parser.add_argument("--difficulty", type=float, default=0.5)
    parser.add_argument("--generators", default="v1,v2,v3")
    parser.add_argument("--probes", default=",".join(PROBES), help=f"comma list of {', '.join(PROBES)}")
    parser.add_argument("--epochs", type=int, default=25, help="CNN training epochs")
    parser.add_argument("--threads", type=int, default=1, help="cores (torch threads and CPU affinity)")
    parser.add_argument("--json", help="also write the table here")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[: args.threads]))
    import torch

    torch.set_num_threads(args.threads)
    from vtb_env.synth import generate

    probes = args.probes.split(",")
    unknown = set(probes) - set(PROBES)
    if unknown:
        raise SystemExit(f"unknown probes {sorted(unknown)}; choose from {list(PROBES)}")
    from vtb_env import ocr

    for probe in [p for p in probes if p in READERS]:
        try:
            _reader(READERS[probe])
        except ocr.OcrUnavailable as error:
            print(f"note: {probe} left out: {error}")
            probes.remove(probe)
    readers = tuple(dict.fromkeys(READERS[p] for p in probes if p in READERS))
    seeds = (args.train_seed, args.test_seed)
    report: dict[str, dict[str, object]] = {}
    for generator in args.generators.split(","):
        data, elapsed = {}, 0.0
        for seed in seeds:
            start = time.perf_counter()
            tasks = generate(args.n, seed, difficulty=args.difficulty, generator=generator)
            elapsed += time.perf_counter() - start
            data[seed] = features(tasks, readers)
        row: dict[str, object] = {
            "tasks_per_s": round(2 * args.n / elapsed, 2),
            "required_share": [round(float(data[s]["y"].mean()), 3) for s in seeds],
        }
        for name in probes:
            forward = _mcc(data[seeds[1]]["y"], PROBES[name](data[seeds[0]], data[seeds[1]], args))
            backward = _mcc(data[seeds[0]]["y"], PROBES[name](data[seeds[1]], data[seeds[0]], args))
            row[name] = [round(forward, 3), round(backward, 3)]
            print(f"{generator} {name:11s} MCC A->B {forward:6.3f}  B->A {backward:6.3f}", flush=True)
        report[generator] = row
    direction = f"{seeds[0]}->{seeds[1]} / {seeds[1]}->{seeds[0]}"
    print(f"\nheld-out MCC ({direction}), {args.n} tasks per seed, difficulty {args.difficulty}")
    gens = list(report)
    print("| probe | " + " | ".join(gens) + " |")
    print("|---|" + "---:|" * len(gens))
    for name in probes:
        cells = [f"{report[g][name][0]:.3f} / {report[g][name][1]:.3f}" for g in gens]
        print(f"| {name} | " + " | ".join(cells) + " |")
    print("| tasks/s | " + " | ".join(str(report[g]["tasks_per_s"]) for g in gens) + " |")
    worst = {g: max(max(abs(v) for v in report[g][name]) for name in probes) for g in gens}
    print("worst |MCC|: " + ", ".join(f"{g} {w:.3f}" for g, w in worst.items()))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"args": vars(args), "report": report}, handle, indent=2)


if __name__ == "__main__":
    main()
