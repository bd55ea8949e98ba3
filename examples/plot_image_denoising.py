"""
Denoising a photograph patch by patch
=====================================

:func:`sk_softmix.image.denoise_image` turns any denoiser of the package into
an image denoiser: every overlapping 7 x 7 patch of a grayscale image is a
point of dimension 49, its mean is split off, and the other 48 coordinates
(an orthonormal basis of the patches of mean zero, where white pixel noise
stays white) go through the denoiser. The denoiser is fitted on 2,000
patches of the noisy image itself that share no pixel, so that it needs no
clean image: Stein's unbiased risk estimate (SURE) trains the attention
denoisers, EM fits the Gaussian mixture. The overlapping estimates are
averaged back into the image.

A softmax head with a key norm, scores ``z_i^T U z - 1/2 z_i^T W z_i``, is
a trainable non-local means: with ``W = U`` its weights are
``exp(-||z - z_i||_U^2 / 2)`` over the prompt's patches (this package's
extension, user guide "Key-bias heads"). It runs twice here: on a global
prompt of patches through ``denoise_image``, and the way non-local means
works, each patch attending over the patches of its own 13 x 13
neighbourhood (:func:`sk_softmix.image.denoise_image_nonlocal`, trained by
Monte-Carlo SURE on the noisy image). scikit-image's non-local means, with
the same patch size and neighbourhood, is the reference. The image is the
camera man of scikit-image (shipped with it, no download), cut to its
central 256 x 256 pixels for a quick run, with noise of standard deviation
0.1. PSNR is ``10 log10(1 / MSE)`` in decibels.
"""

import time

import matplotlib.pyplot as plt
import numpy as np
from skimage import data, img_as_float
from skimage.metrics import peak_signal_noise_ratio, structural_similarity
from skimage.restoration import denoise_nl_means, estimate_sigma

from sk_softmix import GaussianMixtureDenoiser, SoftmaxAttentionDenoiser
from sk_softmix.image import denoise_image, denoise_image_nonlocal

plt.switch_backend("agg")  # draw off-screen: the gallery and the tests collect the figure

sigma = 0.1
clean = img_as_float(data.camera())[128:384, 128:384]
noisy = clean + sigma * np.random.default_rng(0).standard_normal(clean.shape)

# %%
# Four denoisers
# --------------
# The package's denoisers get the noise variance; non-local means estimates
# it, with the settings of scikit-image's documentation.
results = {"noisy": (noisy, 0.0, "")}
start = time.perf_counter()
denoised, head = denoise_image_nonlocal(noisy, sigma**2, random_state=0, return_model=True)
results["key norm over search windows (SURE)"] = (
    denoised,
    time.perf_counter() - start,
    f" (kept: {head.kept})",
)
for name, denoiser in {
    "key-norm softmax attention (SURE)": SoftmaxAttentionDenoiser(
        key_bias="norm", noise_variance=sigma**2, max_iter=100, random_state=0
    ),
    "Gaussian mixture, 8 components": GaussianMixtureDenoiser(
        8, noise_variance=sigma**2, random_state=0
    ),
}.items():
    start = time.perf_counter()
    denoised, fitted = denoise_image(
        noisy, denoiser, n_training_patches=1000, random_state=0, return_model=True
    )
    kept = f" (kept start: {fitted.init_})" if hasattr(fitted, "init_") else ""
    results[name] = (denoised, time.perf_counter() - start, kept)

start = time.perf_counter()
sigma_est = float(estimate_sigma(noisy))
nlm = denoise_nl_means(
    noisy, h=0.8 * sigma_est, sigma=sigma_est, fast_mode=True, patch_size=5, patch_distance=6
)
results["non-local means (scikit-image)"] = (nlm, time.perf_counter() - start, "")

for name, (image, seconds, kept) in results.items():
    psnr = peak_signal_noise_ratio(clean, image, data_range=1.0)
    ssim = structural_similarity(clean, image, data_range=1.0)
    print(f"{name:36s} PSNR {psnr:5.2f} dB  SSIM {ssim:.3f}  {seconds:5.1f} s{kept}")

# %%
# What the numbers say
# --------------------
# With a prompt of 1,000 patches drawn from the whole image, the attention
# denoiser validates its trained heads on held-out patches by SURE and, on
# this image, keeps its linear start, the Wiener map of the mean-free
# coordinates, when the heads do not beat it there. Non-local means compares
# each patch with its neighbours only, which a global prompt of a few
# thousand patches does not replace. The same key-norm head given each
# patch's neighbourhood as its prompt, with its bandwidth and a prior over
# the offsets learned by SURE, is ahead of non-local means, as the benchmark
# (``benchmarks/README.md``, section 8) reports on three images and two
# noise levels.
#
# The learned prior over the 13 x 13 offsets: the nearest offsets and the
# image's horizontal and vertical directions weigh more, the patch's own
# offset (the centre) less than its neighbours.

figure, axis = plt.subplots(figsize=(3.6, 3.2))
shown = axis.imshow(head.offset_bias, cmap="RdBu_r", extent=(-6.5, 6.5, 6.5, -6.5))
axis.set_title("learned offset prior b_delta", fontsize=9)
axis.set_xlabel("column offset")
axis.set_ylabel("row offset")
figure.colorbar(shown)
figure.tight_layout()

# %%
# The images
# ----------

figure, axes = plt.subplots(1, len(results), figsize=(3.2 * len(results), 3.4))
for axis, (name, (image, _, _)) in zip(axes, results.items(), strict=True):
    axis.imshow(np.clip(image, 0, 1), cmap="gray", vmin=0, vmax=1)
    axis.set_title(
        f"{name}\n{peak_signal_noise_ratio(clean, image, data_range=1.0):.1f} dB", fontsize=8
    )
    axis.axis("off")
figure.tight_layout()
