// A browser's cookie jar over plain HTTP, for tests of the server's pages that post forms the way
// a browser without JavaScript would.

/** a client keeping the cookies the pages set; `jar` may be read or replaced to replay an old state */
export function pageClient(url: string) {
  const jar = new Map<string, string>()
  const remember = (res: Response) => {
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';')
      const i = pair.indexOf('=')
      jar.set(pair.slice(0, i), pair.slice(i + 1))
    }
  }
  const cookie = () => [...jar].map(([k, v]) => `${k}=${v}`).join('; ')
  return {
    jar,
    async get(path: string) {
      const res = await fetch(`${url}${path}`, { headers: { cookie: cookie() }, redirect: 'manual' })
      remember(res)
      return {
        status: res.status,
        text: await res.text(),
        location: res.headers.get('location'),
        csp: res.headers.get('content-security-policy'),
      }
    },
    async post(path: string, fields: Record<string, string>) {
      const res = await fetch(`${url}${path}`, {
        method: 'POST',
        headers: { cookie: cookie(), 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams(fields).toString(),
        redirect: 'manual',
      })
      remember(res)
      return { status: res.status, text: await res.text(), location: res.headers.get('location') }
    },
  }
}

/** the form token a page carries */
export const csrfOf = (html: string) => /name="csrf_token" value="([^"]+)"/.exec(html)![1]
