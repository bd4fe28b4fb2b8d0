// The engine's sources stay readable: no function in simulator/engine is longer than 150 lines
// (issue 16; a function that grows past it is a god function in the making: split it).
//
// The scan is lexical: it skips comments and string and character literals, tracks braces, and
// takes a brace block outside any function whose opening brace ends a signature (opens_function)
// as a function body. Its length runs from the line of the opening brace to the line of the
// closing one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr int kMaxFunctionLines = 150;

struct Function {
  int first_line = 0;
  int lines = 0;
  std::string signature;  // the first line of its signature
};

// `text` with comments and the contents of string and character literals replaced by spaces
// (newlines kept, so line numbers hold).
std::string strip(const std::string& text) {
  std::string out = text;
  enum { kCode, kLine, kBlock, kString, kChar, kRaw } state = kCode;
  std::string raw_end;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const char c = text[i];
    const char next = i + 1 < text.size() ? text[i + 1] : '\0';
    switch (state) {
      case kCode:
        if (c == '/' && next == '/') {
          state = kLine;
          out[i] = ' ';
        } else if (c == '/' && next == '*') {
          state = kBlock;
          out[i] = ' ';
        } else if (c == 'R' && next == '"' && (i == 0 || !std::isalnum(text[i - 1]))) {
          const std::size_t open = text.find('(', i + 2);
          raw_end = ")" + text.substr(i + 2, open - (i + 2)) + "\"";
          state = kRaw;
          i = open;
        } else if (c == '"') {
          state = kString;
        } else if (c == '\'' && !(i > 0 && std::isxdigit(text[i - 1]))) {
          state = kChar;  // not a digit separator (1'000)
        }
        break;
      case kLine:
        if (c == '\n') {
          state = kCode;
        } else {
          out[i] = ' ';
        }
        break;
      case kBlock:
        if (c == '*' && next == '/') {
          out[i] = out[i + 1] = ' ';
          ++i;
          state = kCode;
        } else if (c != '\n') {
          out[i] = ' ';
        }
        break;
      case kString:
      case kChar:
        if (c == '\\') {
          out[i] = ' ';
          if (next != '\n') out[++i] = ' ';
        } else if (c == (state == kString ? '"' : '\'')) {
          state = kCode;
        } else if (c != '\n') {
          out[i] = ' ';
        }
        break;
      case kRaw:
        if (text.compare(i, raw_end.size(), raw_end) == 0) {
          i += raw_end.size() - 1;
          state = kCode;
        } else if (c != '\n') {
          out[i] = ' ';
        }
        break;
    }
  }
  return out;
}

bool is_word_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

// Whether the brace at `pos` (outside any function) opens a function body: it follows a ')'
// (a parameter list; at namespace or class scope no control statement can precede it), a
// qualifier (const, override, noexcept, final), a trailing return type, or a constructor's member
// initialisers that end in a braced one.
bool opens_function(const std::string& code, std::size_t pos) {
  std::size_t p = pos;
  while (p > 0 && std::isspace(static_cast<unsigned char>(code[p - 1])))
    --p;
  if (p == 0) return false;
  const char prev = code[p - 1];
  if (prev == ')') return true;
  const std::size_t semi = code.rfind(';', p - 1);
  const std::size_t from = semi == std::string::npos ? 0 : semi + 1;
  const std::string head = code.substr(from, p - from);
  const auto has = [&](const char* s) { return head.find(s) != std::string::npos; };
  if (prev == '}') return has(") :") || has("):");
  if (!is_word_char(prev) && prev != '>') return false;
  std::size_t w = p;
  while (w > 0 && is_word_char(code[w - 1]))
    --w;
  const std::string word = code.substr(w, p - w);
  for (const char* q : {"const", "override", "noexcept", "final", "mutable"}) {
    if (word == q) return true;
  }
  return has(") ->") || has(")->");
}

std::vector<Function> functions(const std::string& text) {
  const std::string code = strip(text);
  std::vector<Function> out;
  std::vector<std::pair<std::size_t, bool>> open;  // (brace position, is a function body)
  int depth_in_function = 0;
  for (std::size_t i = 0; i < code.size(); ++i) {
    if (code[i] == '{') {
      const bool body = depth_in_function == 0 && opens_function(code, i);
      open.emplace_back(i, body);
      if (body || depth_in_function > 0) ++depth_in_function;
    } else if (code[i] == '}' && !open.empty()) {
      const auto [at, body] = open.back();
      open.pop_back();
      if (depth_in_function > 0) --depth_in_function;
      if (!body) continue;
      const auto line_of = [&](std::size_t p) {
        return 1 + static_cast<int>(std::count(code.begin(), code.begin() + p, '\n'));
      };
      Function f;
      f.first_line = line_of(at);
      f.lines = line_of(i) - f.first_line + 1;
      // The signature's first line: after the previous ';', '{' or '}'.
      std::size_t from = code.find_last_of(";{}", at == 0 ? 0 : at - 1);
      from = from == std::string::npos || from >= at ? 0 : from + 1;
      while (from < at && std::isspace(static_cast<unsigned char>(code[from])))
        ++from;
      f.signature = text.substr(from, text.find('\n', from) - from);
      out.push_back(f);
    }
  }
  return out;
}

// The scanner finds functions and measures them.
TEST(SourceSize, ScannerMeasuresFunctions) {
  const std::string text =
      "namespace a {\n"
      "struct S {\n"
      "  int f() const { return 1; }\n"
      "  std::array<int, 2> v{{1, 2}};\n"
      "};\n"
      "// a comment with a { brace\n"
      "int g(int x) {\n"
      "  if (x) {\n"
      "    const char* s = \"}\";\n"
      "  }\n"
      "  auto l = [] { return '}'; };\n"
      "  return 1'000;\n"
      "}\n"
      "S::S(int y) : y_(y), z_{y} {\n"
      "}\n"
      "}  // namespace a\n";
  const std::vector<Function> found = functions(text);
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[0].lines, 1);  // f
  EXPECT_EQ(found[1].first_line, 7);
  EXPECT_EQ(found[1].lines, 7);  // g
  EXPECT_EQ(found[2].lines, 2);  // the constructor
}

TEST(SourceSize, NoEngineFunctionOver150Lines) {
  const std::filesystem::path root = std::filesystem::path(PLANNER_SOURCE_DIR) / "simulator/engine";
  ASSERT_TRUE(std::filesystem::is_directory(root)) << root;
  int files = 0;
  std::string too_long;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
    const std::string ext = entry.path().extension().string();
    if (!entry.is_regular_file() || (ext != ".cpp" && ext != ".hpp")) continue;
    ++files;
    std::ifstream in(entry.path());
    std::stringstream buffer;
    buffer << in.rdbuf();
    for (const Function& f : functions(buffer.str())) {
      if (f.lines > kMaxFunctionLines) {
        too_long += "\n  " + entry.path().lexically_relative(root).string() + ":" +
                    std::to_string(f.first_line) + " (" + std::to_string(f.lines) +
                    " lines): " + f.signature;
      }
    }
  }
  EXPECT_GT(files, 10);
  EXPECT_TRUE(too_long.empty()) << "functions over " << kMaxFunctionLines
                                << " lines in simulator/engine:" << too_long;
}

}  // namespace
