"""Bad input beyond tests/test_bad_input.py's table, on the Vision Transformer's upload and the atlas's .txt upload.

- A damaged image was refused with PIL's own English reason inside the message ("文件被截断或已损坏（image
  file is truncated (150 bytes not processed)）", "(broken PNG file (chunk b'\\~%\\xe2'))"): in 中文 half the
  message was English, in English it quoted a chunk's raw bytes. The reason is now one of two, in the visitor's
  language.
- A .txt file of only spaces and line breaks (or only a byte-order mark) was told "the text is empty: type a
  sentence", though the visitor typed nothing and gave a file: it is now told the file holds no text.
"""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from tests.conftest import open_page
from tests.test_checkpoint import english_in_chinese
from tx_explorer import locales, models
from tx_explorer.data import images
from tx_explorer.errors import InputError
from tx_explorer.views import atlas as atlas_view

pytestmark = pytest.mark.usefixtures("one_thread")


def _save(im: Image.Image, fmt: str) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt)
    return buf.getvalue()


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


NOISE = Image.fromarray(np.random.default_rng(0).integers(0, 256, (64, 64, 3), dtype=np.uint8), "RGB")
PNG, JPEG, WEBP = (_save(NOISE, f) for f in ("PNG", "JPEG", "WEBP"))
GARBAGE_IDAT = (  # a sound header, then compressed data that is not zlib
    b"\x89PNG\r\n\x1a\n"
    + _chunk(b"IHDR", struct.pack(">IIBBBBB", 40, 40, 8, 2, 0, 0, 0))
    + _chunk(b"IDAT", b"notzlib" * 10)
    + _chunk(b"IEND", b"")
)
FLIPPED = bytearray(PNG)
FLIPPED[len(PNG) // 2 : len(PNG) // 2 + 40] = bytes(b ^ 0xFF for b in FLIPPED[len(PNG) // 2 : len(PNG) // 2 + 40])
DAMAGED = {  # name → (bytes, the reason's key)
    "png-cut": (PNG[: len(PNG) // 2], "image_cut"),
    "jpeg-cut-early": (JPEG[: len(JPEG) // 10], "image_cut"),  # PIL: "Truncated File Read"
    "jpeg-cut": (JPEG[: len(JPEG) // 2], "image_cut"),  # PIL: "image file is truncated (150 bytes not processed)"
    "png-flipped-bytes": (bytes(FLIPPED), "image_damaged"),
    "png-garbage-idat": (GARBAGE_IDAT, "image_damaged"),
    "webp-cut": (WEBP[: len(WEBP) // 2], "image_damaged"),  # PIL: "could not create decoder object"
}


@pytest.mark.parametrize("name", DAMAGED)
def test_a_damaged_image_is_refused_wholly_in_the_visitors_language(name: str) -> None:
    data, reason = DAMAGED[name]
    with pytest.raises(InputError) as refused:
        images.load_image(data)
    err = refused.value
    assert err.key == "image_corrupt" and err.params["detail"].key == reason
    assert not english_in_chinese(err), err.message("zh")
    assert locales.text("errors", reason, "zh") in err.message("zh")
    assert "truncated or corrupt" in str(err) and "\\x" not in str(err) and "decoder" not in str(err)


def test_the_page_tells_a_damaged_upload_in_words_a_student_reads() -> None:
    at = open_page("vision_transformer", vit_source="upload")
    at.get("file_uploader")[0].set_value(("cut.jpg", JPEG[: len(JPEG) // 2], "image/jpeg")).run()
    assert not at.exception, [e.message for e in at.exception]
    assert [e.value for e in at.error] == [
        "This input cannot be used: the file is truncated or corrupt ("
        + locales.text("errors", "image_cut", "en")
        + ")"
    ]
    assert not at.get("plotly_chart")  # nothing half drawn from the sample behind it


@pytest.fixture(scope="module")
def tiny_llama():
    return models.load_model("tiny-llama")


@pytest.mark.parametrize("data", [b"   \n\n\t  \r\n", b"\n", b"\xef\xbb\xbf", "\u3000\u00a0\n".encode()])
def test_a_txt_of_only_blanks_is_told_the_file_holds_no_text(tiny_llama, data: bytes) -> None:
    with pytest.raises(InputError) as refused:
        atlas_view.source_ids(tiny_llama, "upload", upload=data)
    assert refused.value.key == "atlas_blank_file"
    assert "type a sentence" not in str(refused.value) and "输入一个句子" not in refused.value.message("zh")


def test_the_atlas_page_tells_a_blank_file_and_reads_the_next_one() -> None:
    at = open_page("atlas", atlas_model="tiny-llama", atlas_source="upload")
    at.get("file_uploader")[0].set_value(("blank.txt", b"  \n\n \t\n", "text/plain")).run()
    assert not at.exception, [e.message for e in at.exception]
    assert [e.value for e in at.error] == [
        "This input cannot be used: " + locales.text("errors", "atlas_blank_file", "en")
    ]
    at.get("file_uploader")[0].set_value(("notes.txt", b"The cat sat on the mat. " * 4, "text/plain")).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.get("plotly_chart")
