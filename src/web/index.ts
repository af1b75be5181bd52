// The server's own web pages share this: the stylesheet route. Pages use layout.ts, html.ts,
// headers.ts, cookies.ts, csrf.ts and devices.ts directly.
import { Router } from 'express'
import { STYLESHEET } from './style.js'
import { STYLESHEET_PATH } from './layout.js'

export function webRoutes(): Router {
  const r = Router()
  r.get(STYLESHEET_PATH, (_req, res) => {
    res.setHeader('Cache-Control', 'public, max-age=3600')
    res.setHeader('X-Content-Type-Options', 'nosniff')
    res.type('text/css').send(STYLESHEET)
  })
  return r
}
