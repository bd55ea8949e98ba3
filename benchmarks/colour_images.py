"""Section 14: colour images against BM3D's colour version (issue 40).

Run on its own: ``python benchmarks/colour_images.py [--threads N]
[--images astronaut,chelsea,coffee] [--sigmas 0.1,0.2]`` (about 8 minutes
on one thread). scikit-image's astronaut, chelsea and coffee in [0, 1], the
same Gaussian noise on every channel (seed 0), denoised in one run by
``bm3d.bm3d_rgb`` (CBM3D: the opponent colour transform, groups matched on
the luminance; at the true noise, its default profile) and by
``denoise_image_wiener(..., channel_axis=-1)`` (the opponent transform,
each new channel denoised on its own, its SURE probes seeded). PSNR over
the three channels in dB, seconds, and issue 40's colour targets: ours
minus CBM3D's PSNR, our time over its. Both run on ``--threads`` threads
(torch's and NumPy's pools alike). Needs the ``benchmark`` extra.
"""

import argparse
import os
import sys

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--threads", type=int, default=1)
parser.add_argument("--images", default="astronaut,chelsea,coffee")
parser.add_argument("--sigmas", default="0.1,0.2")
ARGS = parser.parse_args()
# the thread pools are sized when NumPy and torch load
for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[variable] = str(ARGS.threads)

import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from common import print_image_results, psnr, target_row  # noqa: E402

from sk_softmix.image import denoise_image_wiener  # noqa: E402


def main():
    import bm3d
    from skimage import data, img_as_float

    torch.set_num_threads(ARGS.threads)
    print(f"load average at the start: {os.getloadavg()}; {ARGS.threads} thread(s) for both")
    methods = {
        "CBM3D (bm3d_rgb)": lambda noisy, sigma: bm3d.bm3d_rgb(noisy, sigma),
        "denoise_image_wiener": lambda noisy, sigma: denoise_image_wiener(
            noisy, sigma**2, channel_axis=-1, device="cpu", random_state=0
        ),
    }
    rows, targets = [], []
    for image_name in ARGS.images.split(","):
        clean = img_as_float(getattr(data, image_name)())
        for sigma in (float(value) for value in ARGS.sigmas.split(",")):
            noisy = clean + sigma * np.random.default_rng(0).standard_normal(clean.shape)
            results = {}
            for name, method in methods.items():
                start = time.perf_counter()
                denoised = method(noisy, sigma)
                results[name] = (psnr(denoised, clean), time.perf_counter() - start)
                rows.append(
                    [
                        f"{image_name} {clean.shape[0]} x {clean.shape[1]}",
                        f"{sigma}",
                        name,
                        f"{results[name][0]:.2f}",
                        f"{results[name][1]:.1f}",
                    ]
                )
                print(rows[-1], flush=True)
            ours, reference = results["denoise_image_wiener"], results["CBM3D (bm3d_rgb)"]
            targets.append(target_row(image_name, sigma, ours, reference, 0.1, 1.0))
    print_image_results(
        rows, targets, "targets (issue 40): denoise_image_wiener - CBM3D (dB); time / CBM3D's"
    )


if __name__ == "__main__":
    main()
