"""Section 15: large images, in memory and as dask arrays (issue 40).

Run on its own: ``python benchmarks/large_images.py [--sizes 1024,3072]
[--chunks 1024] [--threads 2]`` (about 15 minutes on 2 CPU cores at
3072). scikit-image's camera resized to ``n x n`` pixels with Gaussian noise of
standard deviation 0.1 (seed 0), denoised by ``denoise_image_wiener`` in
memory and then as a ``dask.array`` of ``--chunks`` pixels a side
(synchronous scheduler): seconds, the process's peak resident memory above
what it held before the call (sampled every 20 ms, as in sections 2 and 6), the image's own size,
PSNR, and the largest difference between the two results. Needs the
``benchmark`` extra (scikit-image) and dask (the ``distributed`` extra).
"""

import argparse
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
from common import PEAK_SAMPLER_SOURCE, print_table  # noqa: E402

from sk_softmix.image import denoise_image_wiener  # noqa: E402


def peak_extra(call):
    """``(result, seconds, peak MiB above the resident memory before the call)``."""
    namespace = {}
    exec(PEAK_SAMPLER_SOURCE, namespace)  # the sampler sections 2 and 6 run in subprocesses
    start = time.perf_counter()
    result, extra = namespace["peak_extra_mib"](call, interval=0.02)
    return result, time.perf_counter() - start, extra


def main():
    import dask
    import dask.array as da
    from skimage import data, img_as_float, transform

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1024,3072")
    parser.add_argument("--chunks", type=int, default=1024)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"load average at the start: {os.getloadavg()}; torch on {args.threads} thread(s)")
    rows = []
    for n in (int(value) for value in args.sizes.split(",")):
        clean = transform.resize(img_as_float(data.camera()), (n, n), order=1)
        noisy = clean + 0.1 * np.random.default_rng(0).standard_normal(clean.shape)

        def psnr(image, clean=clean):
            return 10 * np.log10(1 / np.mean((image - clean) ** 2))

        in_memory, seconds, extra = peak_extra(
            lambda noisy=noisy: denoise_image_wiener(noisy, 0.01, random_state=0)
        )
        rows.append(
            [n, "in memory", f"{seconds:.1f}", f"{extra:.0f}", f"{psnr(in_memory):.2f}", "-"]
        )
        print(rows[-1], flush=True)
        lazy = da.from_array(noisy, chunks=args.chunks)
        with dask.config.set(scheduler="synchronous"):
            chunked, seconds, extra = peak_extra(
                lambda lazy=lazy: denoise_image_wiener(lazy, 0.01, random_state=0).compute()
            )
        difference = float(np.abs(chunked - in_memory).max())
        rows.append(
            [
                n,
                f"dask, chunks {args.chunks}",
                f"{seconds:.1f}",
                f"{extra:.0f}",
                f"{psnr(chunked):.2f}",
                f"{difference:.1e}",
            ]
        )
        print(rows[-1], f"image {noisy.nbytes / 2**20:.0f} MiB", flush=True)
    print_table(
        "large images: seconds, peak MiB above the start, PSNR (dB), max |dask - in memory|",
        ["n", "how", "s", "peak extra MiB", "PSNR", "max difference"],
        rows,
    )
    print(f"load average at the end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
