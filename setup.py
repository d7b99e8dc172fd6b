"""Installation script for tfktopic (topic-guided and Bayesian recurrent language models)."""

import pathlib

from setuptools import find_packages, setup

HERE = pathlib.Path(__file__).parent


def _version():
    namespace = {}
    exec((HERE / "tfktopic" / "version.py").read_text(), namespace)
    return namespace["__version__"]


setup(
    name="tfktopic",
    version=_version(),
    description=(
        "Topic-guided and Bayesian recurrent language models (TopicRNN, TCNLM, "
        "rGBN-RNN, SGLD/pSGLD) for Keras 3 and TensorFlow 2"
    ),
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    packages=find_packages(include=["tfktopic", "tfktopic.*"]) + ["tfktopic.pretrained_models"],
    # The small pretrained models of pretrained/ (tfktopic.pretrained) ship as package data.
    package_dir={"tfktopic.pretrained_models": "pretrained"},
    package_data={"tfktopic.pretrained_models": ["index.json", "*/*.json", "*/*.keras"]},
    python_requires=">=3.10,<3.14",
    install_requires=[
        # DESIGN.md section 1 and reference/keras3_tf221_notes.md: the full
        # tensorflow wheel (tf-keras requires it), Keras 3 with the TF backend,
        # TFP (which imports only when tf-keras is installed) and gensim >= 4.2
        # (the coherence fix of gensim issue 3181).
        "tensorflow>=2.21,<2.22",
        "keras>=3.12,<4",
        "tensorflow-probability[tf]>=0.25,<0.26",
        "tf-keras>=2.21,<2.22",
        "gensim>=4.3.3,<5",
        "numpy>=1.26,<3",
        # Topic pictures (tfktopic.pictures: SVG / PNG without Graphviz).
        "matplotlib>=3.8",
        # The run-directory lock (tfktopic.runs.lock): flock on POSIX, msvcrt on Windows.
        "filelock>=3.12",
    ],
    extras_require={
        "test": ["pytest>=8", "pytest-xdist>=3.5", "nltk>=3.9"],
        "bench": [],
        # `tfktopic train --tensorboard DIR` / keras.callbacks.TensorBoard.
        "tensorboard": ["tensorboard>=2.21,<2.22"],
    },
    entry_points={"console_scripts": ["tfktopic=tfktopic.cli:main"]},
    classifiers=[
        "Programming Language :: Python :: 3",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
        "Topic :: Text Processing :: Linguistic",
    ],
)
