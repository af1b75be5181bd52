// Node-API binding for glibc's malloc_trim(0), which hands the free pages inside every malloc arena
// back to the kernel. Nothing in Node calls it, and glibc keeps what was freed, each threadpool
// thread's arena included: scrypt's 16 MiB per login stays resident in each of them after a burst
// of logins. On a libc without malloc_trim, trim() does nothing and returns false.
#include <stdlib.h>
#include <node_api.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

static napi_value trim(napi_env env, napi_callback_info info) {
  (void)info;
  int released = 0;
#if defined(__GLIBC__)
  released = malloc_trim(0);
#endif
  napi_value result;
  napi_get_boolean(env, released != 0, &result);
  return result;
}

NAPI_MODULE_INIT() {
  napi_value fn;
  if (napi_create_function(env, "trim", NAPI_AUTO_LENGTH, trim, NULL, &fn) != napi_ok) return NULL;
  if (napi_set_named_property(env, exports, "trim", fn) != napi_ok) return NULL;
  return exports;
}
