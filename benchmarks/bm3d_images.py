"""Section 12: image denoising against BM3D (issue 30).

Run on its own: ``python benchmarks/bm3d_images.py [--sigmas 0.1,0.2]
[--threads N] [--bm3d-only]`` (about 2 minutes on 2 CPU cores).
scikit-image's camera, moon and coins, scaled to [0, 1], with Gaussian
noise of standard deviation 0.1 and 0.2 (seed 0; ``--sigmas``), denoised in one
run by scikit-image's non-local means (the settings of its documentation,
as in section 8) and wavelet denoiser, BM3D (the ``bm3d`` package at the
true noise, its default profile), trainable non-local means
(``denoise_image_nonlocal``) and the two-stage Wiener denoiser
(``denoise_image_wiener``, its SURE probes seeded too, so that a rerun
picks the same blend): PSNR in dB and seconds, then issue 30's
targets, ours minus BM3D in PSNR and our time over BM3D's. Needs the
``benchmark`` extra (scikit-image and bm3d).
"""

import argparse
import os
import sys

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--sigmas", default="0.1,0.2", help="noise levels, comma-separated")
parser.add_argument(
    "--threads", type=int, default=None, help="threads for every method (default: torch's)"
)
parser.add_argument("--bm3d-only", action="store_true", help="BM3D and denoise_image_wiener alone")
ARGS = parser.parse_args()
if ARGS.threads is not None:  # the thread pools are sized when NumPy and torch load
    for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[variable] = str(ARGS.threads)

import time  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from common import print_image_results, psnr, target_row  # noqa: E402

from sk_softmix.image import denoise_image_wiener  # noqa: E402

IMAGES = ("camera", "moon", "coins")
SIGMAS = tuple(float(value) for value in ARGS.sigmas.split(","))


def methods(sigma):
    import bm3d
    from images import NLM, NONLOCAL, _methods

    wiener = {
        "BM3D": lambda noisy: bm3d.bm3d(noisy, sigma),
        "denoise_image_wiener": lambda noisy: denoise_image_wiener(
            noisy, sigma**2, device="cpu", random_state=0
        ),
    }
    if ARGS.bm3d_only:
        return wiener
    section_8 = _methods(sigma, "cpu")  # the references of section 8, as run there
    return {
        "skimage non-local means": section_8[NLM],
        "skimage wavelet": section_8["denoise_wavelet"],
        "BM3D": lambda noisy: bm3d.bm3d(noisy, sigma),
        "trainable non-local means": section_8[NONLOCAL],
        "denoise_image_wiener": lambda noisy: denoise_image_wiener(
            noisy, sigma**2, device="cpu", random_state=0
        ),
    }


def main():
    import torch
    from skimage import data, img_as_float

    if ARGS.threads is not None:
        torch.set_num_threads(ARGS.threads)
    print(f"load average at the start: {os.getloadavg()}; torch on {torch.get_num_threads()}")
    rows, targets = [], []
    for image_name in IMAGES:
        clean = img_as_float(getattr(data, image_name)())
        for sigma in SIGMAS:
            noisy = clean + sigma * np.random.default_rng(0).standard_normal(clean.shape)
            results = {}
            for name, method in methods(sigma).items():
                start = time.perf_counter()
                denoised = method(noisy)
                value, seconds = psnr(denoised, clean), time.perf_counter() - start
                results[name] = (value, seconds)
                rows.append([image_name, f"{sigma}", name, f"{value:.2f}", f"{seconds:.1f}"])
            ours, reference = results["denoise_image_wiener"], results["BM3D"]
            targets.append(target_row(image_name, sigma, ours, reference, -0.1, 1.5))
    print_image_results(
        rows, targets, "targets (issue 30): denoise_image_wiener - BM3D (dB); time / BM3D's"
    )


if __name__ == "__main__":
    main()
