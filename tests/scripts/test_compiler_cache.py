"""The compiler cache: the hits a build log reports (choosing its folder: tests/scripts/test_build.py)."""

from ssm_conda.compiler_cache import cache_hits


def test_cache_hits_come_from_the_last_ccache_statistics():
    log = (
        "Cacheable calls:    4 /    4 (100.0%)\n  Hits:               0 /    4 ( 0.00%)\n"
        "... the build ...\n"
        "Cacheable calls:    4 /    4 (100.0%)\n  Hits:               3 /    4 (75.00%)\n"
        "    Direct:           0 /    3 ( 0.00%)\n    Preprocessed:     3 /    3 (100.0%)\n"
        "  Misses:             1 /    4 (25.00%)\n"
    )
    assert cache_hits(log) == "3/4"
    assert cache_hits("compiler cache: off (--no-cache)\n") == "-"
    interleaved = "Cacheable calls:    4 /    9 (44.44%)\n++ rm -f /bld/torch-include\n  Hits:    0 /    4 ( 0.00%)\n"
    assert cache_hits(interleaved) == "0/4"
