// A small JSON client for tests: every call returns status, parsed body, headers and raw bytes.
export interface ApiResponse<T = any> {
  status: number;
  body: T;
  raw: Buffer;
  headers: Headers;
}

export interface CallOptions {
  token?: string;
  headers?: Record<string, string>;
  /** Send this exact string/bytes instead of JSON-encoding `body`. */
  rawBody?: string | Buffer;
}

export class Api {
  constructor(
    readonly base: string,
    public token?: string,
  ) {}

  async call<T = any>(method: string, path: string, body?: unknown, opts: CallOptions = {}): Promise<ApiResponse<T>> {
    const headers: Record<string, string> = { ...opts.headers };
    const token = opts.token ?? this.token;
    if (token) headers.authorization = `Bearer ${token}`;
    let payload: string | Buffer | undefined = opts.rawBody;
    if (payload === undefined && body !== undefined) {
      payload = JSON.stringify(body);
      headers['content-type'] = 'application/json';
    }
    const res = await fetch(this.base + path, { method, headers, body: payload as BodyInit | undefined });
    const raw = Buffer.from(await res.arrayBuffer());
    let parsed: unknown = undefined;
    try {
      parsed = raw.byteLength ? JSON.parse(raw.toString('utf8')) : undefined;
    } catch {
      parsed = raw.toString('utf8');
    }
    return { status: res.status, body: parsed as T, raw, headers: res.headers };
  }

  get<T = any>(path: string, opts?: CallOptions) {
    return this.call<T>('GET', path, undefined, opts);
  }
  post<T = any>(path: string, body?: unknown, opts?: CallOptions) {
    return this.call<T>('POST', path, body ?? {}, opts);
  }
  patch<T = any>(path: string, body?: unknown, opts?: CallOptions) {
    return this.call<T>('PATCH', path, body ?? {}, opts);
  }
  put<T = any>(path: string, body?: unknown, opts?: CallOptions) {
    return this.call<T>('PUT', path, body ?? {}, opts);
  }
  delete<T = any>(path: string, opts?: CallOptions) {
    return this.call<T>('DELETE', path, undefined, opts);
  }

  /** Signs in and keeps the token for later calls. */
  async signIn(username: string, password: string): Promise<this> {
    const r = await this.post('/api/auth/login', { username, password }, { token: '' });
    if (r.status !== 200) throw new Error(`sign-in of ${username} failed: ${r.status} ${JSON.stringify(r.body)}`);
    this.token = r.body.token;
    return this;
  }

  as(token: string | undefined): Api {
    return new Api(this.base, token);
  }
}
