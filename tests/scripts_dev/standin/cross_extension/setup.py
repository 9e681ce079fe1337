from setuptools import Extension, setup

setup(name="hello_ext", version="0.1", ext_modules=[Extension("hello_ext", ["hello.cpp"], language="c++")])
