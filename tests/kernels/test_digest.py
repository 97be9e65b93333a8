"""kernels/digest.py: XXH64 against its published values and its Python
reference, on every length class (under 32 bytes, the 8/4/1-byte tails), unaligned data,
and seeds near 2**64."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from colmz.kernels.digest import xxh64, xxh64_ref

#: Published values of XXH64 with seed 0.
KNOWN = {
    b"": 0xEF46DB3751D8E999,
    b"a": 0xD24EC4F1A98C6E5B,
    b"Nobody inspects the spammish repetition": 0xFBCEA83C8A378BF1,
}


def digest(data: bytes, seed: int = 0) -> int:
    return int(xxh64(np.frombuffer(data, np.uint8), np.uint64(seed)))


def test_known_values():
    for data, want in KNOWN.items():
        assert xxh64_ref(data) == want
        assert digest(data) == want


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=300), st.integers(0, 2**64 - 1))
def test_kernel_matches_reference(data, seed):
    assert digest(data, seed) == xxh64_ref(data, seed)


def test_every_length_and_alignment():
    raw = bytes(np.random.default_rng(3).integers(0, 256, 200, dtype=np.uint8))
    for n in range(0, 80):
        for shift in (0, 1, 3, 7):  # data starting at any address
            piece = raw[shift:shift + n]
            assert int(xxh64(np.frombuffer(raw, np.uint8)[shift:shift + n], np.uint64(5))) == \
                xxh64_ref(piece, 5)


def test_any_flipped_bit_changes_the_digest():
    data = bytearray(np.random.default_rng(4).integers(0, 256, 4099, dtype=np.uint8).tobytes())
    base = digest(bytes(data))
    for pos in (0, 31, 32, 2048, 4096, 4098):
        for bit in (0, 7):
            data[pos] ^= 1 << bit
            assert digest(bytes(data)) != base
            data[pos] ^= 1 << bit
    assert digest(bytes(data)) == base
