#include <Python.h>
#include <string>

static PyObject* machine(PyObject*, PyObject*) {
#if defined(__aarch64__)
  std::string name = "aarch64";
#else
  std::string name = "not aarch64";
#endif
  return PyUnicode_FromString(name.c_str());
}

static PyMethodDef methods[] = {{"machine", machine, METH_NOARGS, "the machine it was compiled for"},
                                {nullptr, nullptr, 0, nullptr}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "hello_ext", nullptr, -1, methods};

PyMODINIT_FUNC PyInit_hello_ext(void) { return PyModule_Create(&module); }
