/* h5maxdiff — compare the float datasets of two HDF5 files (test helper).
 *
 *   h5maxdiff A.h5 B.h5 TOL
 *
 * For every dataset of B (walked recursively, H5Lvisit), reads the dataset of the same
 * path in A and B as doubles and prints "NAME rel" with rel = max |a - b| /
 * max |b| (denominator at least 1e-30), then "worst NAME rel". Exit 0 when
 * every rel <= TOL; 1 when one exceeds it, a dataset is missing from A, the
 * shapes differ, or B has no dataset (the message says which); 2 usage or
 * an unreadable file.
 *
 * Why a C tool: the GPU tests compare exported weights on the GPU machine,
 * whose Python may have no h5py (bench/gpu-check.sh runs them there); this needs
 * only the HDF5 hpt itself links. */
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    hid_t a;
    double tol, worst;
    char worst_name[512];
    int n, bad;
} walk;

/* Elements of dataset ds, its dims in dims (rank <= 8); -1 if not simple. */
static long long count(hid_t ds, int *rank, hsize_t dims[8])
{
    hid_t sp = H5Dget_space(ds);
    int r = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
    long long n = r >= 0 && r <= 8 ? 1 : -1;
    if (n > 0) {
        H5Sget_simple_extent_dims(sp, dims, NULL);
        for (int i = 0; i < r; i++)
            n *= (long long)dims[i];
    }
    if (sp >= 0)
        H5Sclose(sp);
    *rank = r;
    return n;
}

static int read_all(hid_t ds, double *buf)
{
    return H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0 ? -1 : 0;
}

/* H5Lvisit callback: every link of B; groups (which H5Dopen2 refuses) are
 * walked into, not compared. */
static herr_t visit(hid_t b, const char *name, const H5L_info_t *info, void *op)
{
    walk *w = op;
    (void)info;
    hid_t o = H5Oexists_by_name(b, name, H5P_DEFAULT) > 0 ? H5Oopen(b, name, H5P_DEFAULT) : -1;
    if (o < 0)
        return 0;
    H5I_type_t it = H5Iget_type(o);
    H5Oclose(o);
    if (it != H5I_DATASET)
        return 0;
    hid_t db = H5Dopen2(b, name, H5P_DEFAULT);
    hid_t da = H5Lexists(w->a, name, H5P_DEFAULT) > 0 ? H5Dopen2(w->a, name, H5P_DEFAULT) : -1;
    if (db < 0 || da < 0) {
        printf("%s: missing from the first file\n", name);
        w->bad = 1;
        if (db >= 0)
            H5Dclose(db);
        return 0;
    }
    int ra, rb;
    hsize_t dima[8], dimb[8];
    long long na = count(da, &ra, dima), nb = count(db, &rb, dimb);
    double *x = NULL, *y = NULL;
    if (na < 0 || na != nb || ra != rb || memcmp(dima, dimb, sizeof(hsize_t) * (size_t)rb)) {
        printf("%s: shapes differ (%lld and %lld elements)\n", name, na, nb);
        w->bad = 1;
    } else if (!(x = malloc(sizeof(double) * (size_t)(na ? na : 1))) ||
               !(y = malloc(sizeof(double) * (size_t)(nb ? nb : 1))) || read_all(da, x) ||
               read_all(db, y)) {
        printf("%s: cannot read (not numeric, or out of memory)\n", name);
        w->bad = 1;
    } else {
        double num = 0, den = 1e-30;
        for (long long i = 0; i < nb; i++) {
            double d = fabs(x[i] - y[i]);
            num = d > num || isnan(d) ? d : num;
            den = fabs(y[i]) > den ? fabs(y[i]) : den;
        }
        double rel = num / den;
        printf("%s %.3e\n", name, rel);
        w->n++;
        if (!(rel <= w->tol))
            w->bad = 1;
        if (!(rel <= w->worst)) {
            w->worst = rel;
            snprintf(w->worst_name, sizeof w->worst_name, "%s", name);
        }
    }
    free(x);
    free(y);
    H5Dclose(da);
    H5Dclose(db);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: h5maxdiff A.h5 B.h5 TOL\n");
        return 2;
    }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    walk w = {.tol = atof(argv[3]), .worst = 0, .worst_name = "-"};
    w.a = H5Fopen(argv[1], H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t b = H5Fopen(argv[2], H5F_ACC_RDONLY, H5P_DEFAULT);
    if (w.a < 0 || b < 0) {
        fprintf(stderr, "h5maxdiff: cannot open %s\n", w.a < 0 ? argv[1] : argv[2]);
        return 2;
    }
    H5Lvisit(b, H5_INDEX_NAME, H5_ITER_NATIVE, visit, &w);
    H5Fclose(w.a);
    H5Fclose(b);
    if (!w.n) {
        printf("%s: no dataset\n", argv[2]);
        return 1;
    }
    printf("worst %s %.3e (tolerance %g)\n", w.worst_name, w.worst, w.tol);
    return w.bad;
}
