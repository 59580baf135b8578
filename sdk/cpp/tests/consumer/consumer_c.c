/* Built against an installed SDK's C ABI (pkg-config keywarden_c, or find_package ... COMPONENTS keywarden_c). */
#include <keywarden/keywarden_c.h>

#include <stdio.h>

int main(int argc, char** argv) {
  kw_client* c = NULL;
  kw_error err;
  kw_app_info app;
  if (argc < 2) {
    fprintf(stderr, "usage: consumer_c <keywarden.json>\n");
    return 2;
  }
  if (kw_client_new(argv[1], NULL, &c, &err) != KW_OK || kw_init(c, &app, &err) != KW_OK) {
    fprintf(stderr, "keywarden error: %s\n", err.message);
    kw_client_free(c);
    return 1;
  }
  printf("consumer_c connected to %s (version %s)\n", app.name, app.version);
  kw_client_free(c);
  return 0;
}
