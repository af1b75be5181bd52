// What every page's POST handler shares: the form read as single strings, and async handlers whose
// failures reach express's error handler.
import type { NextFunction, Request, Response } from 'express'

export type FormFields = Record<string, string | undefined>

/** the form's fields as single strings; undefined when one is repeated (a forged or broken form) */
export function formFields(body: unknown): FormFields | undefined {
  const out: FormFields = {}
  if (!body || typeof body !== 'object') return out
  for (const [k, v] of Object.entries(body as Record<string, unknown>)) {
    if (typeof v !== 'string') return undefined
    out[k] = v
  }
  return out
}

/** an async route handler whose rejection goes to express's error handler */
export function wrap(fn: (req: Request, res: Response) => Promise<unknown>) {
  return (req: Request, res: Response, next: NextFunction) => {
    fn(req, res).catch(next)
  }
}
