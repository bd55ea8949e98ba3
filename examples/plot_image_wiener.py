"""
Gated affine experts on an image: the Wiener denoiser
=====================================================

Non-local means estimates each patch by an attention-weighted average of
the patches around it: a gate over its search window and a *constant*
expert. :func:`sk_softmix.image.denoise_image_wiener` keeps the gate and
gives each group an *affine* expert, the empirical Wiener map of the
attention-weighted mean and covariance of its patches, the softmax-gated
mixture of affine experts of Proposition 2.1 of Gabet, Boursier & Boyer
(2026). The weights and covariances are computed on a pilot estimate, a
first stage (by default BM3D's hard thresholding of groups of similar
blocks), as BM3D and NL-Bayes do. No clean image and no training: the noise level is all it
needs, and it estimates that too when it is not given.

The image is scikit-image's camera man, its central 256 x 256 pixels, with
noise of standard deviation 0.1; the references are scikit-image's non-local
means and this package's trainable non-local means. PSNR is
``10 log10(1 / MSE)`` in decibels.
"""

import time

import matplotlib.pyplot as plt
import numpy as np
from skimage import data, img_as_float
from skimage.restoration import denoise_nl_means, estimate_sigma

from sk_softmix.image import denoise_image_nonlocal, denoise_image_wiener, wiener_sure

plt.switch_backend("agg")  # draw off-screen: the gallery and the tests collect the figure

sigma = 0.1
clean = img_as_float(data.camera())[128:384, 128:384]
noisy = clean + sigma * np.random.default_rng(0).standard_normal(clean.shape)


def psnr(image):
    return 10 * np.log10(1 / np.mean((image - clean) ** 2))


# %%
# Three denoisers of the same search window
# -----------------------------------------
results = {"noisy": (noisy, 0.0)}
start = time.perf_counter()
estimated = float(estimate_sigma(noisy))
results["non-local means (scikit-image)"] = (
    denoise_nl_means(
        noisy, h=0.8 * estimated, sigma=estimated, fast_mode=True, patch_size=5, patch_distance=6
    ),
    time.perf_counter() - start,
)
start = time.perf_counter()
results["trainable non-local means"] = (
    denoise_image_nonlocal(noisy, sigma**2, random_state=0, return_model=False),
    time.perf_counter() - start,
)
start = time.perf_counter()
results["gated affine experts (Wiener)"] = (
    denoise_image_wiener(noisy, sigma**2, random_state=0),
    time.perf_counter() - start,
)
for name, (image, seconds) in results.items():
    print(f"{name:32s} PSNR {psnr(image):6.2f} dB  {seconds:5.1f} s")

# %%
# Its error, estimated without the clean image
# --------------------------------------------
# Monte-Carlo SURE runs both stages twice, once on the image nudged along a
# random probe, and estimates the mean squared error from the noisy image
# alone; here for one fixed blend, half the gated expert and half the
# collaborative one at ``v = 1``. The denoiser picks its blend the same way,
# with SURE on four crops of the image.
fixed = {"collaborative_weight": 0.5, "wiener_variance": 1.0}
estimate = wiener_sure(noisy, sigma**2, random_state=0, **fixed)
true = np.mean((denoise_image_wiener(noisy, sigma**2, **fixed) - clean) ** 2)
print(f"SURE {estimate:.3g} against the true error {true:.3g}")

# %%
# The images
# ----------
figure, axes = plt.subplots(1, len(results), figsize=(3.2 * len(results), 3.4))
for ax, (name, (image, _)) in zip(axes, results.items(), strict=True):
    ax.imshow(image, cmap="gray", vmin=0, vmax=1)
    ax.set_title(f"{name}\n{psnr(image):.2f} dB", fontsize=8)
    ax.axis("off")
figure.tight_layout()
