/* _core.c — the CPython extension of motedb (being written: issue 4). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "mote.h"

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT, "motedb._core", "MoteDB's C core.", -1, NULL,
};

PyMODINIT_FUNC PyInit__core(void)
{
    PyObject *m = PyModule_Create(&core_module);
    if (m && PyModule_AddStringConstant(m, "version", MOTE_VERSION_STRING) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
