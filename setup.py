"""The one compiled piece of kaflite: kaflite.spark._decode, the source's record walk (optional: without a C
compiler the install goes on and kaflite.spark.batches uses its pure decoder). Everything else is in
pyproject.toml. An editable install (`pip install -e .`, as ./run.sh setup does) builds it in place, next
to src/kaflite/spark/_decode.c; running it again (or `./run.sh setup`, which notices a changed source) rebuilds
it after an edit."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "kaflite.spark._decode",
            sources=["src/kaflite/spark/_decode.c"],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)
