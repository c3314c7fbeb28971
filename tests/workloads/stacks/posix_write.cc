// posix_write.cc: the shape of seed 004 (TileDB 2.x, tiledb::sm::Posix::write): every
// write of a tile opens the file, writes at an offset and closes it again, from a member
// function two calls below main. Built with -O2 and without frame pointers, its call
// sites must be the same under both backends (crates/dejavu/tests/stacks_native.rs).
//
// usage: posix_write DIR N   writes N tiles of 64 bytes, round-robin over 4 files in DIR
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace tiledb {
namespace sm {

class Posix {
 public:
  __attribute__((noinline)) int write(const std::string& path, uint64_t offset,
                                      const void* buffer, uint64_t nbytes);
};

int Posix::write(const std::string& path, uint64_t offset, const void* buffer,
                 uint64_t nbytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT, 0644); /* OPEN_LINE */
  if (fd < 0) return -1;
  ssize_t n = ::pwrite(fd, buffer, nbytes, offset); /* WRITE_LINE */
  int r = ::close(fd);                             /* CLOSE_LINE */
  return (n == (ssize_t)nbytes && r == 0) ? 0 : -1;
}

class Writer {
 public:
  explicit Writer(std::string dir) : dir_(std::move(dir)) {}
  __attribute__((noinline)) int write_tile(int file, uint64_t index, const char* tile) {
    std::string path = dir_ + "/frag" + std::to_string(file) + ".tdb";
    return vfs_.write(path, index * 64, tile, 64);
  }

 private:
  std::string dir_;
  Posix vfs_;
};

}  // namespace sm
}  // namespace tiledb

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: posix_write DIR N\n");
    return 2;
  }
  long n = std::atol(argv[2]);
  tiledb::sm::Writer w(argv[1]);
  std::vector<char> tile(64, 'x');
  int failed = 0;
  for (long i = 0; i < n; i++) {
    failed += w.write_tile(int(i % 4), uint64_t(i / 4), tile.data()) != 0;
  }
  std::printf("posix_write: %ld tiles, %d failed\n", n, failed);
  return failed != 0;
}
