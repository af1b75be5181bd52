// The server's own web pages share this: the stylesheet and the passkey script. Pages use
// layout.ts, html.ts, headers.ts, cookies.ts, csrf.ts and devices.ts directly.
import { Router } from 'express'
import { STYLESHEET } from './style.js'
import { STYLESHEET_PATH } from './layout.js'
import { PASSKEY_SCRIPT, PASSKEY_SCRIPT_PATH } from './passkey-script.js'

export function webRoutes(): Router {
  const r = Router()
  r.get(STYLESHEET_PATH, (_req, res) => {
    res.setHeader('Cache-Control', 'public, max-age=3600')
    res.setHeader('X-Content-Type-Options', 'nosniff')
    res.type('text/css').send(STYLESHEET)
  })
  r.get(PASSKEY_SCRIPT_PATH, (_req, res) => {
    res.setHeader('Cache-Control', 'public, max-age=3600')
    res.setHeader('X-Content-Type-Options', 'nosniff')
    res.type('text/javascript').send(PASSKEY_SCRIPT)
  })
  return r
}
