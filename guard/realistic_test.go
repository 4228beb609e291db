package guard

import "testing"

// TestRealisticOutputs: everyday sandbox output (tables, versions, hashes,
// headers, tracebacks, tensors, user agents) has no findings.
func TestRealisticOutputs(t *testing.T) {
	g, _ := New(Config{})
	for _, s := range []string{
		"   id       value\n0   1  123.456000\n1   2  4503.599627\n2  3 212 555 0123",
		"Python 3.11.4 (main, Jun  7 2023, 12:45:48) [GCC 12.2.0] on linux",
		"pip 23.1.2 from /usr/lib/python3/dist-packages/pip (python 3.11)",
		"numpy==1.26.4 pandas==2.1.0 Successfully installed x-1.2.3.4",
		"<__main__.Foo object at 0x7f8b8c0d1e50>",
		"sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		"Traceback: File \"/usr/lib/python3.11/json/decoder.py\", line 337, in decode",
		"Out[3]: array([1.00000000e+00, 2.71828183e+00, 7.38905610e+00])",
		"Date: Tue, 14 Nov 2023 10:12:45 GMT Content-Length: 1234 ETag: \"33a64df551425fcc55e4d42a148795d9f25f89d4\"",
		"npm WARN deprecated inflight@1.0.6: This module is not supported",
		"GET https://api.github.com/repos/org/repo/commits?per_page=100&page=2 200",
		"tensor([[ 0.1234, -0.5678],\n        [ 1.2345,  2.3456]])",
		"user_id=1234567 session=4f3c2a1b-9d8e-4f7a-b6c5-d4e3f2a1b0c9 api_version=2023-10-16",
		"Processed 4,503,601,774 rows in 12.5s; 1 000 000 records",
		"the key: value pairs; auth: ok; token: expired; secret: none; password: hidden",
		"md5 d41d8cd98f00b204e9800998ecf8427e base64 SGVsbG8sIFdvcmxkIQ==",
		"export PATH=/usr/local/bin:/usr/bin:/bin",
		"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
		"ISBN 978-3-16-148410-0, EAN 4006381333931",
		"order 2023-11-14T10:12:45+00:00 total 99.99 EUR",
		"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36",
	} {
		if out, fs := g.Redact(ModeEnforce, s); len(fs) > 0 {
			t.Errorf("%q\n  -> %q %v", s, out, fs)
		}
	}
}
