// Built against an installed SDK (find_package or pkg-config): connects with the configuration given.
#include <keywarden/keywarden.hpp>

#include <iostream>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: consumer <keywarden.json>\n";
    return 2;
  }
  try {
    auto client = keywarden::Client::fromConfig(argv[1]);
    keywarden::AppInfo app = client.init();
    std::cout << "consumer connected to " << app.name << " (version " << app.version << ")\n";
    return 0;
  } catch (const keywarden::Error& e) {
    std::cerr << "keywarden error: " << e.what() << "\n";
    return 1;
  }
}
