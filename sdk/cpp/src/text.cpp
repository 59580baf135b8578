// Small text helpers: ISO 8601 timestamps without timegm (not portable to MSVC) and ASCII case.
#include <cctype>

#include "internal.hpp"

namespace keywarden::detail {

namespace {
// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
std::int64_t daysFromCivil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

bool num(const std::string& s, std::size_t pos, std::size_t len, int& out) {
  if (pos + len > s.size()) return false;
  out = 0;
  for (std::size_t i = pos; i < pos + len; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    out = out * 10 + (s[i] - '0');
  }
  return true;
}
}  // namespace

std::optional<TimePoint> parseIsoTime(const std::string& s) {
  int y, mo, d, h, mi, sec;
  if (!num(s, 0, 4, y) || s.size() < 19 || s[4] != '-' || !num(s, 5, 2, mo) || s[7] != '-' || !num(s, 8, 2, d) ||
      (s[10] != 'T' && s[10] != 't' && s[10] != ' ') || !num(s, 11, 2, h) || s[13] != ':' || !num(s, 14, 2, mi) ||
      s[16] != ':' || !num(s, 17, 2, sec))
    return std::nullopt;
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60) return std::nullopt;
  std::size_t pos = 19;
  std::int64_t ms = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    int digits = 0;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      if (digits < 3) ms = ms * 10 + (s[pos] - '0');
      ++digits;
      ++pos;
    }
    if (digits == 0) return std::nullopt;
    for (int i = digits; i < 3; ++i) ms *= 10;
  }
  std::int64_t offsetMin = 0;
  if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
    ++pos;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    int oh, om;
    if (!num(s, pos + 1, 2, oh) || pos + 3 >= s.size() || s[pos + 3] != ':' || !num(s, pos + 4, 2, om)) return std::nullopt;
    offsetMin = (oh * 60 + om) * (s[pos] == '-' ? -1 : 1);
    pos += 6;
  } else {
    return std::nullopt;  // a timestamp without zone is ambiguous
  }
  if (pos != s.size()) return std::nullopt;
  std::int64_t secs = daysFromCivil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d)) * 86400 + h * 3600 + mi * 60 +
                      sec - offsetMin * 60;
  return TimePoint(std::chrono::duration_cast<TimePoint::duration>(std::chrono::milliseconds(secs * 1000 + ms)));
}

std::optional<std::int64_t> parseUtcMs(const std::string& s) {
  int y, mo, d, h, mi, sec;
  if (s.size() < 20 || !num(s, 0, 4, y) || s[4] != '-' || !num(s, 5, 2, mo) || s[7] != '-' || !num(s, 8, 2, d) || s[10] != 'T' ||
      !num(s, 11, 2, h) || s[13] != ':' || !num(s, 14, 2, mi) || s[16] != ':' || !num(s, 17, 2, sec) || s.back() != 'Z')
    return std::nullopt;
  static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  if (mo < 1 || mo > 12 || d < 1 || d > kDays[mo - 1] + (mo == 2 && leap ? 1 : 0) || h > 23 || mi > 59 || sec > 59) return std::nullopt;
  std::int64_t ms = 0;
  std::size_t end = s.size() - 1;  // the Z
  if (end != 19) {
    std::size_t digits = end - 20;
    if (s[19] != '.' || digits < 1 || digits > 9) return std::nullopt;
    for (std::size_t i = 20; i < end; ++i) {
      if (s[i] < '0' || s[i] > '9') return std::nullopt;
      if (i < 23) ms = ms * 10 + (s[i] - '0');
    }
    for (std::size_t i = digits; i < 3; ++i) ms *= 10;
  }
  return (daysFromCivil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d)) * 86400 + h * 3600 + mi * 60 + sec) * 1000 + ms;
}

TimePoint timeFromMs(std::int64_t ms) {
  return TimePoint(std::chrono::duration_cast<TimePoint::duration>(std::chrono::milliseconds(ms)));
}

std::int64_t msOf(TimePoint t) { return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count(); }

std::string lowerAscii(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trimAscii(const std::string& s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

}  // namespace keywarden::detail
