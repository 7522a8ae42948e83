"""Write the setup.py that packages the staged tfref tree as a platform wheel."""
import sys
from pathlib import Path

TEMPLATE = '''from setuptools import setup
from setuptools.dist import Distribution


class BinaryDistribution(Distribution):
    """The package carries compiled libraries: the wheel is platform-specific."""

    def has_ext_modules(self):
        return True


setup(
    name="tfref",
    version="{version}",
    description="Reference framework compiled by nvbuild.sh",
    packages=["tfref", "tfref.io"],
    package_data={{"tfref": ["lib/*.so"]}},
    install_requires=["numpy"],
    distclass=BinaryDistribution,
    zip_safe=False,
)
'''

if __name__ == "__main__":
    Path(sys.argv[1], "setup.py").write_text(TEMPLATE.format(version=sys.argv[2]))
