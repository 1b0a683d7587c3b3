from setuptools import setup
setup(name="toxed", version="0.1")
