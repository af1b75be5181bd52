// Cookies of the server's own pages: HttpOnly, SameSite=Lax (sent on the top-level navigation
// from an app to the sign-in page, never on a cross-site form post or fetch), and Secure whenever
// the server is reached over https.
import type { Request, Response } from 'express'

export type CookieOptions = {
  /** the server's public URL: Secure when it is https */
  publicUrl: string
  /** seconds; 0 clears the cookie */
  maxAgeS: number
  path?: string
}

export function cookieHeader(name: string, value: string, opts: CookieOptions): string {
  const secure = opts.publicUrl.startsWith('https:') ? '; Secure' : ''
  return `${name}=${value}; Path=${opts.path ?? '/'}; Max-Age=${opts.maxAgeS}; HttpOnly; SameSite=Lax${secure}`
}

/** adds a Set-Cookie header, keeping the ones already set on the response */
export function setCookie(res: Response, name: string, value: string, opts: CookieOptions): void {
  const prev = res.getHeader('Set-Cookie')
  const list = prev === undefined ? [] : Array.isArray(prev) ? prev : [String(prev)]
  res.setHeader('Set-Cookie', [...list.filter((c) => !c.startsWith(`${name}=`)), cookieHeader(name, value, opts)])
}

export const clearCookie = (res: Response, name: string, opts: Omit<CookieOptions, 'maxAgeS'>) =>
  setCookie(res, name, '', { ...opts, maxAgeS: 0 })

export function readCookie(req: Pick<Request, 'headers'>, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const i = part.indexOf('=')
    if (i > 0 && part.slice(0, i).trim() === name) return part.slice(i + 1).trim() || undefined
  }
  return undefined
}
