package io.keywarden;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A small, strict JSON reader and writer (RFC 8259). Objects become {@code LinkedHashMap<String, Object>}, arrays
 * {@code ArrayList<Object>}, strings {@code String}, {@code true}/{@code false} {@code Boolean}, {@code null} Java
 * {@code null}; an integer that fits is a {@code Long}, any other number a {@code BigDecimal}. Nesting is bounded
 * (a hostile answer cannot overflow the stack); bad input raises {@link Json.ParseException}.
 */
public final class Json {
    private static final int MAX_DEPTH = 200;

    private Json() {}

    /** Malformed JSON. */
    public static final class ParseException extends RuntimeException {
        private static final long serialVersionUID = 1L;

        ParseException(String message) {
            super(message);
        }
    }

    public static Object parse(String text) {
        Json.Reader r = new Json.Reader(text);
        r.ws();
        Object v = r.value(0);
        r.ws();
        if (r.i != text.length()) throw new ParseException("trailing data at " + r.i);
        return v;
    }

    /** The object, or null when {@code text} is JSON but not an object; throws ParseException when not JSON. */
    @SuppressWarnings("unchecked")
    public static Map<String, Object> parseObject(String text) {
        Object v = parse(text);
        return v instanceof Map ? (Map<String, Object>) v : null;
    }

    private static final class Reader {
        final String s;
        int i;

        Reader(String s) {
            this.s = s;
        }

        void ws() {
            while (i < s.length()) {
                char c = s.charAt(i);
                if (c == ' ' || c == '\t' || c == '\n' || c == '\r') i++;
                else break;
            }
        }

        ParseException fail(String what) {
            return new ParseException(what + " at " + i);
        }

        Object value(int depth) {
            if (depth > MAX_DEPTH) throw fail("nesting too deep");
            if (i >= s.length()) throw fail("unexpected end");
            char c = s.charAt(i);
            switch (c) {
                case '{': {
                    i++;
                    Map<String, Object> m = new LinkedHashMap<>();
                    ws();
                    if (i < s.length() && s.charAt(i) == '}') {
                        i++;
                        return m;
                    }
                    while (true) {
                        ws();
                        if (i >= s.length() || s.charAt(i) != '"') throw fail("expected a key");
                        String k = string();
                        ws();
                        if (i >= s.length() || s.charAt(i) != ':') throw fail("expected ':'");
                        i++;
                        ws();
                        m.put(k, value(depth + 1));
                        ws();
                        if (i >= s.length()) throw fail("unexpected end");
                        char d = s.charAt(i++);
                        if (d == '}') return m;
                        if (d != ',') throw fail("expected ',' or '}'");
                    }
                }
                case '[': {
                    i++;
                    List<Object> a = new ArrayList<>();
                    ws();
                    if (i < s.length() && s.charAt(i) == ']') {
                        i++;
                        return a;
                    }
                    while (true) {
                        ws();
                        a.add(value(depth + 1));
                        ws();
                        if (i >= s.length()) throw fail("unexpected end");
                        char d = s.charAt(i++);
                        if (d == ']') return a;
                        if (d != ',') throw fail("expected ',' or ']'");
                    }
                }
                case '"':
                    return string();
                case 't':
                    return literal("true", Boolean.TRUE);
                case 'f':
                    return literal("false", Boolean.FALSE);
                case 'n':
                    return literal("null", null);
                default:
                    if (c == '-' || (c >= '0' && c <= '9')) return number();
                    throw fail("unexpected character");
            }
        }

        Object literal(String word, Object v) {
            if (!s.startsWith(word, i)) throw fail("bad literal");
            i += word.length();
            return v;
        }

        Object number() {
            int start = i;
            if (s.charAt(i) == '-') i++;
            if (i >= s.length()) throw fail("bad number");
            if (s.charAt(i) == '0') i++;
            else if (s.charAt(i) >= '1' && s.charAt(i) <= '9') while (i < s.length() && Character.isDigit(s.charAt(i)) && s.charAt(i) < 128) i++;
            else throw fail("bad number");
            boolean integral = true;
            if (i < s.length() && s.charAt(i) == '.') {
                integral = false;
                i++;
                int d = i;
                while (i < s.length() && s.charAt(i) >= '0' && s.charAt(i) <= '9') i++;
                if (i == d) throw fail("bad fraction");
            }
            if (i < s.length() && (s.charAt(i) == 'e' || s.charAt(i) == 'E')) {
                integral = false;
                i++;
                if (i < s.length() && (s.charAt(i) == '+' || s.charAt(i) == '-')) i++;
                int d = i;
                while (i < s.length() && s.charAt(i) >= '0' && s.charAt(i) <= '9') i++;
                if (i == d) throw fail("bad exponent");
            }
            String t = s.substring(start, i);
            if (integral) {
                BigInteger b = new BigInteger(t);
                if (b.bitLength() < 64) return b.longValue();
                return new BigDecimal(b);
            }
            if (t.length() > 400) throw fail("number too long");
            return new BigDecimal(t);
        }

        String string() {
            i++; // opening quote
            StringBuilder b = new StringBuilder();
            while (true) {
                if (i >= s.length()) throw fail("unterminated string");
                char c = s.charAt(i++);
                if (c == '"') return b.toString();
                if (c < 0x20) throw fail("control character in a string");
                if (c != '\\') {
                    b.append(c);
                    continue;
                }
                if (i >= s.length()) throw fail("bad escape");
                char e = s.charAt(i++);
                switch (e) {
                    case '"': b.append('"'); break;
                    case '\\': b.append('\\'); break;
                    case '/': b.append('/'); break;
                    case 'b': b.append('\b'); break;
                    case 'f': b.append('\f'); break;
                    case 'n': b.append('\n'); break;
                    case 'r': b.append('\r'); break;
                    case 't': b.append('\t'); break;
                    case 'u': {
                        if (i + 4 > s.length()) throw fail("bad \\u escape");
                        int v = 0;
                        for (int k = 0; k < 4; k++) {
                            int d = Character.digit(s.charAt(i++), 16);
                            if (d < 0) throw fail("bad \\u escape");
                            v = v * 16 + d;
                        }
                        b.append((char) v);
                        break;
                    }
                    default:
                        throw fail("bad escape");
                }
            }
        }
    }

    /** Compact JSON text of maps, lists, strings, numbers, booleans and null. */
    public static String write(Object v) {
        StringBuilder b = new StringBuilder();
        write(b, v);
        return b.toString();
    }

    private static void write(StringBuilder b, Object v) {
        if (v == null) {
            b.append("null");
        } else if (v instanceof String) {
            quote(b, (String) v);
        } else if (v instanceof Boolean) {
            b.append(v.toString());
        } else if (v instanceof Double || v instanceof Float) {
            double d = ((Number) v).doubleValue();
            if (Double.isNaN(d) || Double.isInfinite(d)) b.append("null");
            else if (d == Math.rint(d) && Math.abs(d) < 1e15) b.append((long) d);
            else b.append(d);
        } else if (v instanceof BigDecimal) {
            b.append(((BigDecimal) v).toString());
        } else if (v instanceof Number) {
            b.append(((Number) v).longValue());
        } else if (v instanceof Map) {
            b.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                if (!first) b.append(',');
                first = false;
                quote(b, String.valueOf(e.getKey()));
                b.append(':');
                write(b, e.getValue());
            }
            b.append('}');
        } else if (v instanceof Iterable) {
            b.append('[');
            boolean first = true;
            for (Object o : (Iterable<?>) v) {
                if (!first) b.append(',');
                first = false;
                write(b, o);
            }
            b.append(']');
        } else {
            quote(b, v.toString());
        }
    }

    private static void quote(StringBuilder b, String s) {
        b.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                case '\r': b.append("\\r"); break;
                case '\t': b.append("\\t"); break;
                case '\b': b.append("\\b"); break;
                case '\f': b.append("\\f"); break;
                default:
                    if (c < 0x20 || (Character.isSurrogate(c) && !pairedAt(s, i))) b.append(String.format("\\u%04x", (int) c));
                    else b.append(c);
            }
        }
        b.append('"');
    }

    private static boolean pairedAt(String s, int i) {
        char c = s.charAt(i);
        if (Character.isHighSurrogate(c)) return i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1));
        return i > 0 && Character.isHighSurrogate(s.charAt(i - 1));
    }

    // --- typed access used throughout the SDK -----------------------------------------------------

    /** A JSON integer as a long (a Long value), else null. */
    static Long integer(Object v) {
        return v instanceof Long ? (Long) v : null;
    }

    static String str(Object v) {
        return v instanceof String ? (String) v : null;
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> obj(Object v) {
        return v instanceof Map ? (Map<String, Object>) v : null;
    }
}
