/** One row of the error catalog (errors/catalog.ts). */
export interface CatalogEntry {
  readonly status: number
  readonly exit: 1 | 2
  readonly meaning: string
  readonly fix: string
}

export const entry = (status: number, exit: 1 | 2, meaning: string, fix: string): CatalogEntry => ({
  status,
  exit,
  meaning,
  fix,
})
