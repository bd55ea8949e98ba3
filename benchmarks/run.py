"""The benchmark suite's entry point: every section, one table each, and the targets.

Usage::

    python benchmarks/run.py [--quick] [--device cpu|cuda] [--out results.json]
                             [--sections engine memory training in_context prompt_size
                                         large_prompt images mixtures]

Every number is printed next to a reference measured in the same run (SDPA, a
dense matmul, LDA, EM refitting, the Bayes risk); nothing asserts on time.
The tables and the targets are also written as JSON to ``--out``, and the
prompt-size figure next to it (``<out>_prompt_size.png``) when matplotlib is
installed.
"""

import argparse
import json
import os
import platform
import sys
import time

# the sections are sibling modules; make them importable however run.py is called
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import engine  # noqa: E402
import images  # noqa: E402
import in_context  # noqa: E402
import large_prompt  # noqa: E402
import memory  # noqa: E402
import mixtures  # noqa: E402
import prompt_size  # noqa: E402
import torch  # noqa: E402
import training  # noqa: E402

SECTIONS = (
    "engine",
    "memory",
    "training",
    "in_context",
    "prompt_size",
    "large_prompt",
    "images",
    "mixtures",
)
NOT_MEASURED = "not measured"


def targets(results, quick, device):
    """Each target: what was measured and whether it is met (True, False or None)."""
    found = {}
    engine_rows = results.get("engine", {}).get("rows", [])
    for label, prefix, bound in (
        ("softmax_attention >= 1.0x fused SDPA", "softmax_attention()", 1.0),
        ("transform >= 0.9x fused SDPA", "softmax H=", 0.9),
    ):
        ours = [r for r in engine_rows if r["entry"].startswith(prefix)]
        if ours:
            worst = min(ours, key=lambda r: r["speed_vs_sdpa"])
            found[label] = {
                "met": all(r["speed_vs_sdpa"] >= bound for r in ours),
                "measured": f"min {worst['speed_vs_sdpa']:.2f}x ({worst['entry']}, n="
                f"{worst['n_queries']}, L={worst['prompt_length']}, p={worst['n_features']})",
            }
    repeats = [r for r in engine_rows if r["entry"] == "SDPA H=1 again"]
    if repeats:
        ratios = [r["speed_vs_sdpa"] for r in repeats]
        found["(timing noise: SDPA against itself)"] = {
            "met": None,
            "measured": f"{min(ratios):.2f}-{max(ratios):.2f}x over {len(ratios)} shapes",
        }
    memory_rows = [r for r in results.get("memory", {}).get("rows", [])]
    if memory_rows:
        worst = max(memory_rows, key=lambda r: r["ratio_to_smallest_n"])
        fixed = [r for r in memory_rows if r["within_bound_fixed_mmap_threshold"] is not None]
        found["peak extra memory independent of n_queries"] = {
            # every row within one chunk of scores + O(L p) + O(n p) input/output
            "met": all(r["within_bound"] for r in memory_rows),
            "measured": f"max ratio to smallest n {worst['ratio_to_smallest_n']:.2f} "
            f"({worst['entry']}, n={worst['n_queries']}); with MALLOC_MMAP_THRESHOLD_ "
            f"fixed, within bound: {all(r['within_bound_fixed_mmap_threshold'] for r in fixed)}",
        }
    big = [
        r
        for r in engine_rows
        if r["entry"] == "softmax H=2"
        and r["prompt_length"] >= 1_000_000
        and r["n_queries"] >= 100_000
    ]
    big += [
        r
        for r in results.get("large_prompt", {}).get("rows", [])
        if r["prompt_length"] >= 1_000_000 and r["n_queries"] >= 100_000
    ]
    found["1e6-token prompt with 1e5 queries completes"] = (
        {
            "met": all(r.get("finite", True) for r in big),
            "measured": f"{big[-1]['seconds']:.1f} s (softmax H=2, p={big[-1]['n_features']}"
            + (
                f", peak extra {big[-1]['peak_extra_mib']:,.0f} MiB"
                if "peak_extra_mib" in big[-1]
                else ""
            )
            + ")",
        }
        if big
        else {"met": None, "measured": NOT_MEASURED + (" (full mode only)" if quick else "")}
    )
    fit = results.get("training", {}).get("denoiser")
    if fit:
        seconds = fit["seconds_to_1pct"]
        found["Figure 2 task 1% excess risk in <= 10 s of fit"] = {
            "met": seconds is not None and seconds <= 10.0,
            "measured": "not reached on the max_iter grid"
            if seconds is None
            else f"{seconds:.1f} s (fit time at the first max_iter on the grid reaching it)",
        }
    classifier_rows = results.get("training", {}).get("classifier", {}).get("rows", [])
    default_fits = [r for r in classifier_rows if r["estimator"].endswith("(auto)")]
    if default_fits:
        slowest = max(default_fits, key=lambda r: r["fit_seconds"])
        found["SoftmaxAttentionClassifier fit <= 2 s on C1, C2, iris, wine, breast cancer"] = {
            "met": all(r["fit_seconds"] <= 2.0 for r in default_fits),
            "measured": f"max {slowest['fit_seconds']:.2f} s ({slowest['task']}, "
            f"{slowest['n_train']:,} points)",
        }
    image_rows = results.get("images", {}).get("rows", [])
    for sigma in sorted({r["sigma"] for r in image_rows}):
        psnr = {
            r["method"]: r["psnr"]
            for r in image_rows
            if r["image"] == "camera" and r["sigma"] == sigma
        }
        if images.NONLOCAL in psnr:
            ours, nlm = psnr[images.NONLOCAL], psnr[images.NLM]
            mixture = psnr["GaussianMixtureDenoiser (8 components)"]
            found[f"camera, sigma {sigma}: key norm >= non-local means and > GMM (PSNR)"] = {
                "met": ours >= nlm and ours > mixture,
                "measured": f"{ours:.2f} dB against {nlm:.2f} (NLM) and {mixture:.2f} (GMM)",
            }
    steps = results.get("images", {}).get("training_steps")
    if steps:
        ratio = steps["seconds_per_step"]["SURE"] / steps["seconds_per_step"]["supervised"]
        found["SURE training step <= 2x a supervised one at p = 63"] = {
            "met": ratio <= 2.0,
            "measured": f"{ratio:.2f}x ({steps['seconds_per_step']['SURE'] * 1e3:.0f} ms a step)",
        }
    for method, how in (
        (images.NONLOCAL, "search windows of 13 x 13 offsets, 100 SURE steps on 96 x 96 crops"),
        (images.KEY_NORM, "global prompt of 2,000 training patches, stride 1"),
    ):
        camera = [r for r in image_rows if r["image"] == "camera" and r["method"] == method]
        if camera:
            slowest = max(r["seconds"] for r in camera)
            found[f"512 x 512 image denoised in < 60 s, SURE training included ({method})"] = {
                "met": slowest < 60.0,
                "measured": f"{slowest:.1f} s (camera; {how})",
            }
    mixture_rows = results.get("mixtures", {}).get("rows", [])
    if mixture_rows:
        ratios = {
            r["mixture"]: r["ratio"] for r in mixture_rows if r["method"] == mixtures.KEY_NORM
        }
        dot = {
            r["mixture"]: r["ratio"] for r in mixture_rows if r["method"] == mixtures.DOT_PRODUCT
        }
        n = results["mixtures"]["n"]
        found[f"key norm within 2% of Bayes on every mixture of section 9 ({n:,} points)"] = {
            "met": all(ratio <= 1.02 for ratio in ratios.values()),
            "measured": ", ".join(f"{k}: {v:.3f}" for k, v in ratios.items()),
        }
        found["dot product above the key norm on every mixture of section 9"] = {
            "met": all(dot[k] > ratios[k] for k in ratios),
            "measured": ", ".join(f"{k}: {v:.3f}" for k, v in dot.items()),
        }
    cross = results.get("engine", {}).get("cross_device")
    found["CUDA >= 20x CPU speed"] = (
        {"met": cross["speedup"] >= 20, "measured": f"{cross['speedup']:.1f}x on {cross['shape']}"}
        if cross
        else {"met": None, "measured": NOT_MEASURED + f" (device {device})"}
    )
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small shapes, a few minutes on CPU")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default: cpu)")
    parser.add_argument("--out", default="results.json", help="JSON file to write")
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    parser.add_argument(
        "--max-gflop",
        type=float,
        default=None,
        help="skip engine shapes above this many GFLOP per head (default: none)",
    )
    args = parser.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        parser.error("--device cuda was asked for but CUDA is not available")
    started = time.perf_counter()
    results = {
        "quick": args.quick,
        "device": args.device,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "gpu": torch.cuda.get_device_name() if args.device.startswith("cuda") else None,
        "section_seconds": {},
        # other processes' load skews absolute times; ratios are measured side by side
        "load_average_at_start": os.getloadavg(),
    }
    print(
        f"sk_softmix benchmarks: device {args.device}, torch {torch.__version__}, "
        f"{results['threads']} threads, {'quick' if args.quick else 'full'} mode"
    )
    figure = os.path.splitext(args.out)[0] + "_prompt_size.png"
    for name in args.sections:
        section_start = time.perf_counter()
        if name == "engine":
            results[name] = engine.run(args.quick, args.device, args.max_gflop)
        elif name == "prompt_size":
            results[name] = prompt_size.run(args.quick, args.device, figure)
        else:
            results[name] = {
                "memory": memory,
                "training": training,
                "in_context": in_context,
                "large_prompt": large_prompt,
                "images": images,
                "mixtures": mixtures,
            }[name].run(args.quick, args.device)
        results["section_seconds"][name] = time.perf_counter() - section_start
    results["targets"] = targets(results, args.quick, args.device)
    results["total_seconds"] = time.perf_counter() - started
    results["load_average_at_end"] = os.getloadavg()

    print("\n### Targets\n")
    print("| target | met | measured |")
    print("|---|---|---|")
    for target, outcome in results["targets"].items():
        met = {True: "yes", False: "NO", None: "-"}[outcome["met"]]
        print(f"| {target} | {met} | {outcome['measured']} |")
    print(
        f"\nload average (1, 5, 15 min): {results['load_average_at_start']} at start, "
        f"{results['load_average_at_end']} at end"
    )
    print(
        f"\ntotal {results['total_seconds']:.0f} s; sections: "
        + ", ".join(f"{k} {v:.0f} s" for k, v in results["section_seconds"].items())
    )
    with open(args.out, "w") as handle:
        json.dump(results, handle, indent=2)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
