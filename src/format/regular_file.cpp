#include "format/regular_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/check.hpp"

namespace qmoe::format {

namespace {

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

int open_regular_file(const std::filesystem::path& path, size_t& size) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused just below.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  check(fd >= 0, "{}: cannot open: {}", path.string(), std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    fail("{}: is {}; qmoe reads regular files only", path.string(), kind_of(info.st_mode));
  }
  size = static_cast<size_t>(info.st_size);
  return fd;
}

std::string read_regular_file(const std::filesystem::path& path, size_t max_bytes) {
  size_t size = 0;
  const int fd = open_regular_file(path, size);
  if (size > max_bytes) {
    ::close(fd);
    fail("{}: {} bytes, more than the {} accepted for this file", path.string(), size, max_bytes);
  }
  std::string text(size, '\0');
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd, text.data() + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int read_errno = n < 0 ? errno : 0;
      ::close(fd);
      fail("{}: read failed after {} of {} bytes{}{}", path.string(), done, size,
           read_errno ? ": " : "", read_errno ? std::strerror(read_errno) : "");
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return text;
}

}  // namespace qmoe::format
