"""The recipe's source: PyPI's version-only address first, so a version bump does not 404."""

import io
import urllib.error
import urllib.request

import pytest
import yaml
from ssm_conda.channels import sha256_of
from ssm_conda.console import PipelineError
from ssm_conda.matrix import plan
from ssm_conda.paths import recipe_of
from ssm_conda.selection import Selection
from ssm_conda_dev.sdist import fetch_sdist, recipe_source

RECIPE = recipe_of("causal-conv1d")

CONTEXT = yaml.safe_load(RECIPE.read_text())["context"]
NAME, VERSION = CONTEXT["name"], CONTEXT["version"]


def pypi_source_url(version: str) -> str:
    """PyPI's redirect to a project's file: nothing in it but the project and the file name."""
    return f"https://files.pythonhosted.org/packages/source/{NAME[0]}/{NAME}/{NAME.replace('-', '_')}-{version}.tar.gz"


def rendered_urls(tmp_path, version: str) -> list[str]:
    """The source URLs rattler-build renders from the recipe with another version in its context."""
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(RECIPE.read_text().replace(f'version: "{VERSION}"', f'version: "{version}"'))
    (variant,) = plan(Selection(cuda="13.0", python="3.12", torch="2.13", arch="9.0"), recipes=[recipe])
    (source,) = [s for s in variant.rendered.recipe.to_dict()["source"] if "url" in s]
    return source["url"]


def test_a_version_bump_needs_only_version_and_sha(tmp_path):
    urls = rendered_urls(tmp_path, "1.8.0")
    assert urls[0] == pypi_source_url("1.8.0")
    assert all(url.endswith("/causal_conv1d-1.8.0.tar.gz") for url in urls)


def test_tooling_reads_the_urls_rattler_build_renders(tmp_path):
    assert recipe_source()["url"] == rendered_urls(tmp_path, VERSION)
    assert recipe_source()["url"][0] == pypi_source_url(VERSION)



def test_pinned_sdist_matches_the_recipe_sha(sdist):
    assert sdist.name == f"causal_conv1d-{VERSION}.tar.gz"
    assert sha256_of(sdist) == recipe_source()["sha256"]


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SSM_CONDA_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def serve(monkeypatch, content: dict[str, bytes]) -> list[str]:
    """urlopen answering 404 for every URL but those in content; returns the URLs asked for."""
    asked = []

    def urlopen(url, timeout):
        asked.append(url)
        if url not in content:
            raise urllib.error.HTTPError(url, 404, "Not Found", None, None)
        return io.BytesIO(content[url])

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    return asked


def test_fetch_falls_back_to_the_next_mirror(sdist, empty_cache, monkeypatch):
    urls = recipe_source()["url"]
    assert len(urls) > 1
    asked = serve(monkeypatch, {urls[-1]: sdist.read_bytes()})
    fetched = fetch_sdist()
    assert fetched == empty_cache / "sources" / sdist.name
    assert sha256_of(fetched) == recipe_source()["sha256"]
    assert asked == urls


def test_fetch_without_any_mirror_names_each(empty_cache, monkeypatch):
    serve(monkeypatch, {})
    with pytest.raises(PipelineError) as err:
        fetch_sdist()
    assert all(f"{url}: HTTP Error 404" in str(err.value) for url in recipe_source()["url"])
    assert not list((empty_cache / "sources").iterdir())


def test_fetch_rejects_a_wrong_file(empty_cache, monkeypatch):
    serve(monkeypatch, {recipe_source()["url"][0]: b"not the sdist"})
    with pytest.raises(PipelineError, match="the recipe pins"):
        fetch_sdist()
    assert not list((empty_cache / "sources").iterdir())

