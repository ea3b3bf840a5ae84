"""The one image loader the app uses: bytes in, an RGB picture (or a clear ``ValueError``) out.

Uploads are untrusted. The loader refuses empty, oversized, unknown and truncated files and decompression
bombs (a small file declaring a huge canvas), and it normalises the many legal image flavours to 8-bit RGB:
palette and 16-bit images, CMYK JPEGs, transparency (composited over white), EXIF orientation and animated
GIF/WebP (first frame). Every conversion is reported in ``notes`` (a key of the Vision Transformer page's locale
and its fields) so the page can show the preprocessing in the visitor's language.
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from tx_explorer.errors import InputError

FORMATS = {"PNG": "PNG", "JPEG": "JPEG", "WEBP": "WebP", "BMP": "BMP", "GIF": "GIF"}
MAX_BYTES = 20 * 1024 * 1024  # uploads beyond this are refused before decoding
MAX_PIXELS = 25_000_000  # e.g. 5000 × 5000; a photo from a phone is ~12 MP
EXIF_ORIENTATION = 0x0112


Note = tuple[str, dict[str, object]]  # ("note_palette", {}), ("note_converted", {"mode": "L"}): key and fields


@dataclass(frozen=True)
class LoadedImage:
    image: Image.Image  # 8-bit RGB, upright
    format: str  # "PNG", "JPEG", …
    original_mode: str  # PIL mode before conversion ("P", "RGBA", "I;16", "CMYK", …)
    original_size: tuple[int, int]  # (width, height) as stored
    notes: tuple[Note, ...]  # each conversion applied, in order


def _corrupt(exc: BaseException) -> InputError:
    """A file PIL cannot decode, its reason told in the visitor's language: cut short, or damaged. PIL's own words
    ("broken PNG file (chunk b'\\x00…')", "could not create decoder object") are English and say nothing to a
    student, so they are not quoted (they read "image_corrupt" with an English reason inside a Chinese message)."""
    cut = isinstance(exc, EOFError) or "truncated" in str(exc).lower()
    return InputError("image_corrupt", detail=InputError("image_cut") if cut else InputError("image_damaged"))


def _open(data: bytes, max_pixels: int) -> Image.Image:
    """Parse the header (no pixel decoding yet) and refuse unknown formats and huge canvases."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            im = Image.open(io.BytesIO(data), formats=list(FORMATS))
        except (Image.DecompressionBombError, Image.DecompressionBombWarning):
            raise InputError("image_bomb") from None
        except UnidentifiedImageError:
            raise InputError("not_an_image", formats=", ".join(FORMATS.values())) from None
        except (OSError, SyntaxError, EOFError) as exc:
            raise _corrupt(exc) from None
    w, h = im.size
    if w < 1 or h < 1:
        raise InputError("image_no_pixels", w=w, h=h)
    if w * h > max_pixels:
        raise InputError("image_too_many_pixels", w=w, h=h, pixels=w * h, limit=max_pixels)
    return im


def _decode(im: Image.Image) -> list[Note]:
    """Decode the (first frame's) pixels; truncated or corrupt data becomes a ``ValueError``."""
    notes = []
    frames = getattr(im, "n_frames", 1)
    if frames > 1:
        im.seek(0)
        notes.append(("note_animated", {"frames": frames}))
    try:
        im.load()
    except (OSError, SyntaxError, EOFError, ValueError) as exc:
        raise _corrupt(exc) from None
    return notes


def _to_rgb(im: Image.Image) -> tuple[Image.Image, list[Note]]:
    """Any PIL mode → 8-bit RGB, scaling 16-bit data and compositing transparency over white."""
    notes = []
    if im.mode in ("I;16", "I;16L", "I;16B", "I;16N", "I", "F"):
        arr = np.asarray(im, dtype=np.float64)
        top = 65535.0 if im.mode != "F" and arr.max() > 255 else max(float(arr.max()), 1.0)
        im = Image.fromarray(np.clip(arr / top * 255.0 + 0.5, 0, 255).astype(np.uint8), "L")
        notes.append(("note_bit_depth", {}))
    if im.mode == "P":
        im = im.convert("RGBA" if "transparency" in im.info else "RGB")
        notes.append(("note_palette", {}))
    if im.mode == "CMYK":
        im = im.convert("RGB")
        notes.append(("note_converted", {"mode": "CMYK"}))
    if im.mode in ("RGBA", "LA", "PA", "RGBa", "La"):
        rgba = im.convert("RGBA")
        im = Image.alpha_composite(Image.new("RGBA", rgba.size, (255, 255, 255, 255)), rgba).convert("RGB")
        notes.append(("note_transparency", {}))
    if im.mode != "RGB":
        notes.append(("note_converted", {"mode": im.mode}))
        im = im.convert("RGB")
    return im, notes


def load_image(data: bytes, *, max_pixels: int = MAX_PIXELS, max_bytes: int = MAX_BYTES) -> LoadedImage:
    """Decode ``data`` (PNG, JPEG, WebP, BMP or GIF) into an upright 8-bit RGB image.

    Raises:
        ValueError: with a message fit for the user, for anything that is not a sound, reasonably sized image.
    """
    if not data:
        raise InputError("file_empty")
    if len(data) > max_bytes:
        raise InputError("file_too_big", mb=len(data) / 2**20, limit=max_bytes / 2**20)
    im = _open(data, max_pixels)
    fmt, mode, size = FORMATS[im.format], im.mode, im.size
    notes = _decode(im)
    orientation = im.getexif().get(EXIF_ORIENTATION, 1)
    if orientation not in (1, None):
        im = ImageOps.exif_transpose(im)
        notes.append(("note_rotated", {"orientation": orientation}))
    rgb, more = _to_rgb(im)
    return LoadedImage(image=rgb, format=fmt, original_mode=mode, original_size=size, notes=tuple(notes + more))


def center_square(image: Image.Image, size: int) -> Image.Image:
    """Crop the central square and resize it to ``size × size`` (bicubic; a no-op when already that size)."""
    w, h = image.size
    side = min(w, h)
    left, top = (w - side) // 2, (h - side) // 2
    square = image.crop((left, top, left + side, top + side))
    return square if square.size == (size, size) else square.resize((size, size), Image.Resampling.BICUBIC)


def letterbox(image: Image.Image, side: int, fill: tuple[int, int, int] = (240, 240, 240)) -> Image.Image:
    """``image`` scaled to fit a ``side × side`` square (its pixels kept sharp when enlarged) and centred on ``fill``:
    a picture of any shape drawn at one size (a 1 × 1000 strip drawn 220 px wide was 220,000 px tall)."""
    w, h = image.size
    scale = side / max(w, h)
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    resample = Image.Resampling.NEAREST if scale > 1 else Image.Resampling.LANCZOS
    box = Image.new("RGB", (side, side), fill)
    box.paste(image.convert("RGB").resize(size, resample), ((side - size[0]) // 2, (side - size[1]) // 2))
    return box


def to_image(pixels: np.ndarray) -> Image.Image:
    """``[H, W, 3]`` uint8 → a PIL RGB image."""
    return Image.fromarray(np.asarray(pixels, dtype=np.uint8), "RGB")


def to_array(image: Image.Image) -> np.ndarray:
    """``[H, W, 3]`` uint8."""
    return np.asarray(image.convert("RGB"), dtype=np.uint8)
